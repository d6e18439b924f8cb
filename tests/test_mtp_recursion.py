"""Drafts 2..k: the engine's MTP recursion (MtpDrafter through ModelRunner, on the paged MTP cache) against
a direct transformers computation of the same recursion, on the embedded trained model in float32: the MTP
layer is fed its own shared_head-normed output and its own draft, one position further each time."""
import pytest
import torch

from checkpoints import load_reference
from mtpserve import _C
from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.model_loader import load_model

K = 3
BLOCK_SIZE = 4


def reference_drafts(ref, ref_mtp, prompt, k):
    ids = torch.tensor([prompt])
    hidden = ref.model(ids).last_hidden_state[0]
    first = int(ref.lm_head(hidden[-1]).argmax())
    tokens, previous, drafts = prompt[1:] + [first], hidden, []
    for _ in range(k):
        n = len(tokens)
        positions = torch.arange(1, n + 1)[None]
        embeds = ref_mtp.embed_tokens(torch.tensor([tokens]))
        causal = torch.full((n, n), float("-inf")).triu(1)[None, None]
        out = ref_mtp.layers[0](embeds, previous[None], position_embeddings=ref_mtp.rotary_emb(embeds, positions),
                                attention_mask=causal, position_ids=positions, past_key_values=None)[0]
        drafts.append(int(ref_mtp.shared_head(out[-1]).argmax()))
        # transformers' MTP layer ends in its post norm (shared_head.norm): its output is already normed.
        tokens, previous = tokens + [drafts[-1]], torch.cat([previous, out[-1:]])
    return first, drafts


@torch.no_grad()
def test_engine_drafts_equal_the_transformers_recursion():
    ref, ref_mtp = load_reference(DEFAULT_MODEL)
    model = load_model(DEFAULT_MODEL, dtype="float32", device="cpu")
    gen = torch.Generator().manual_seed(0)
    for length in (1, 6, 13):
        prompt = torch.randint(3, model.config.vocab_size, (length,), generator=gen).tolist()
        caches, mtp_caches = model.allocate_caches(8, BLOCK_SIZE)
        got = _C.drafts_after_prefill(model.target, caches, model.mtp_layers[0], mtp_caches[0], BLOCK_SIZE, prompt, K)
        assert got == reference_drafts(ref, ref_mtp, prompt, K), f"prompt of {length}"
