"""The C++ runtime against transformers' DeepseekV3ForCausalLM and MtpModel, in float32, on every device
with kernels: prefill over a batch of sequences of different lengths, token-by-token decode through the
paged latent cache (several non-contiguous blocks per sequence), and the MTP layer's logits."""
import pytest
import torch

from checkpoints import load_reference, write_checkpoint
from conftest import DEVICES
from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.model_loader import load_model
from paged import PagedLayout

CONFIGS = {
    # q_proj without LoRA; 4 groups keep 2; one dense layer; YaRN with mscale in the softmax scale.
    "no-q-lora/grouped/yarn": dict(
        q_lora_rank=None, n_group=4, topk_group=2, first_k_dense_replace=1,
        rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=128,
                          mscale=1.0, mscale_all_dim=1.0, beta_fast=32, beta_slow=1)),
    # q LoRA; 2 groups keep 1; every layer MoE; plain RoPE.
    "q-lora/all-moe": dict(q_lora_rank=24, n_group=2, topk_group=1, first_k_dense_replace=0),
    # q LoRA; YaRN whose mscale != mscale_all_dim also scales cos/sin; two dense layers.
    "q-lora/two-dense/yarn-mscale": dict(
        q_lora_rank=40, n_group=4, topk_group=3, num_experts_per_tok=3, first_k_dense_replace=2,
        num_hidden_layers=4, rope_scaling=dict(rope_type="yarn", factor=2.0, original_max_position_embeddings=256,
                                               mscale=0.707, mscale_all_dim=1.0)),
}
PROMPT_LENS = [5, 23, 17, 1, 12]  # a prefill batch of short and long (> 16 rows) queries
DECODE_STEPS = 6
BLOCK_SIZE = 4
# float32 end to end; the GPU's reductions (cuBLAS, our attention) run in another order than the CPU's.
TOLERANCE = {"cpu": 1e-4, "cuda:0": 1e-3}


def rel_err(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return ((ours - ref).abs().max() / ref.abs().max()).item()


MODELS = [*CONFIGS, "embedded"]


@pytest.fixture(scope="module", params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(scope="module", params=MODELS, ids=[*CONFIGS, "embedded-trained-model"])
def models(request, device, tmp_path_factory):
    if request.param == "embedded":  # the trained default model's real (bf16) weights, run in float32
        path = DEFAULT_MODEL
    else:
        path = tmp_path_factory.mktemp("ckpt")
        write_checkpoint(path, seed=len(request.param), **CONFIGS[request.param])
    ref, ref_mtp = load_reference(path)
    return ref, ref_mtp, load_model(path, dtype="float32", device=device)


def on(device, step):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in step.items()}


def run_target(ours, layout, caches, ids_per_seq, new_counts):
    """One forward over the last new_counts[seq] tokens of each sequence."""
    step = on(ours.device, layout.step(new_counts))
    ids = torch.cat([ids_per_seq[s][-n:] for s, n in new_counts.items()]).to(ours.device)
    hidden = ours.target.forward(caches, ids, **step)
    return hidden.cpu(), ours.target.logits(hidden).cpu(), step["query_start"]


@torch.no_grad()
def test_prefill_decode_and_mtp_match_transformers(models, device):
    ref, ref_mtp, ours = models
    tolerance = TOLERANCE[device]
    vocab = ours.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(0, vocab, (n,), generator=gen) for n in PROMPT_LENS]
    layout = PagedLayout(num_blocks=64, block_size=BLOCK_SIZE, seed=1)
    caches, mtp_caches = ours.allocate_caches(64, BLOCK_SIZE)
    for _ in seqs:
        layout.add_sequence()

    # Prefill every prompt in one batch.
    hidden, logits, starts = run_target(ours, layout, caches, seqs, {s: len(t) for s, t in enumerate(seqs)})
    hiddens = [hidden[starts[s]:starts[s + 1]] for s in range(len(seqs))]
    for s, ids in enumerate(seqs):
        expected = ref(ids[None]).logits[0]
        assert rel_err(logits[starts[s]:starts[s + 1]], expected) <= tolerance, f"prefill seq {s}"

    # Decode one token per sequence per step through the paged cache.
    for _ in range(DECODE_STEPS):
        seqs = [torch.cat([ids, torch.randint(0, vocab, (1,), generator=gen)]) for ids in seqs]
        hidden, logits, _ = run_target(ours, layout, caches, seqs, {s: 1 for s in range(len(seqs))})
        for s, ids in enumerate(seqs):
            hiddens[s] = torch.cat([hiddens[s], hidden[s:s + 1]])
            assert rel_err(logits[s], ref(ids[None]).logits[0, -1]) <= tolerance, f"decode seq {s}"

    for last_rows_only in (False, True):
        mtp_caches[0].zero_()
        check_mtp(ours, ref, ref_mtp, seqs, hiddens, mtp_caches[0], tolerance, last_rows_only)


def check_mtp(ours, ref, ref_mtp, seqs, hiddens, cache, tolerance, last_rows_only):
    """MTP pair i = (token i+1, target hidden i), at rotary position i + 1 as in transformers: the
    prompt's pairs in one batch, then the decoded ones a pair per step. `last_rows_only`: the prompt's forward
    gives each sequence's last row alone, as the engine's fill does; its other rows only write their cache rows,
    which the decoded pairs then attend over."""
    mtp, layout = ours.mtp_layers[0], PagedLayout(num_blocks=64, block_size=BLOCK_SIZE, seed=2)
    prompt_pairs = [n - 1 for n in PROMPT_LENS]
    got, pairs = [[] for _ in seqs], [[] for _ in seqs]
    for s in range(len(seqs)):
        layout.add_sequence()
    schedule = [{s: n for s, n in enumerate(prompt_pairs) if n > 0}] + [{s: 1 for s in range(len(seqs))}] * DECODE_STEPS
    for counts in schedule:
        step = on(ours.device, layout.step(counts, position_offset=1))
        ids = torch.cat([seqs[s][layout.lens[s] - n + 1: layout.lens[s] + 1] for s, n in counts.items()])
        prev = torch.cat([hiddens[s][layout.lens[s] - n: layout.lens[s]] for s, n in counts.items()])
        outputs = {s: 1 if last_rows_only else n for s, n in counts.items()}
        out = mtp.logits(mtp.forward(ours.target, cache, ids.to(ours.device), prev.to(ours.device), **step,
                                     outputs_per_seq=list(outputs.values()) if last_rows_only else None)).cpu()
        start = 0
        for s, n in outputs.items():
            got[s].append(out[start:start + n])
            pairs[s].extend(range(layout.lens[s] - n, layout.lens[s]))
            start += n
        assert start == len(out)
    for s, ids in enumerate(seqs):
        expected = reference_mtp_logits(ref, ref_mtp, ids)[pairs[s]]
        assert rel_err(torch.cat(got[s]), expected) <= tolerance, f"mtp seq {s}"


def reference_mtp_logits(ref, ref_mtp, ids):
    """transformers' MtpLayer over pairs (token i+1, target hidden i) at positions i + 1, called as a
    module (MtpModel's driver methods differ between transformers releases)."""
    n = len(ids)
    last_hidden = ref.model(ids[None]).last_hidden_state[:, : n - 1]
    positions = torch.arange(1, n)[None]
    embeds = ref_mtp.embed_tokens(ids[None, 1:])
    causal = torch.full((n - 1, n - 1), float("-inf")).triu(1)[None, None]
    hidden = ref_mtp.layers[0](embeds, last_hidden, position_embeddings=ref_mtp.rotary_emb(embeds, positions),
                               attention_mask=causal, position_ids=positions, past_key_values=None)
    return ref_mtp.shared_head(hidden)[0]
