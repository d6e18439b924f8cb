#!/usr/bin/env python3
"""Build the tokenizer and token files for the tiny DeepSeek-V3 + MTP model (runs on CPU).

Writes into --out (default .data/ in the repo root, ignored by git):
  tokenizer/tokenizer.json, tokenizer/tokenizer_config.json   byte-level BPE, DeepSeek-style chat template
  train.bin            uint16 token stream of rendered training chats, concatenated (each starts with BOS)
  train_docs.npy       int64 start offset of each chat in train.bin
  val.bin              uint16 token stream of rendered held-out chats (for held-out loss)
  heldout_prompts.json first user turn of held-out chats, rendered with add_generation_prompt, + token ids
  meta.json            counts and settings

Usage: .venv/bin/python scripts/prepare_tiny_data.py [--max-train-tokens 20000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import numpy as np
from tqdm import tqdm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
from mtpserve.sharegpt import iter_records, is_held_out  # noqa: E402

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
SPECIALS = [BOS, EOS, USER, ASSISTANT]  # ids 0..3

# DeepSeek-style template: bos, system text, then <｜User｜>{u} / <｜Assistant｜>{a}<｜end▁of▁sentence｜>.
CHAT_TEMPLATE = (
    "{% set ns = namespace(system='') %}"
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{% if ns.system %}{% set ns.system = ns.system + '\\n\\n' %}{% endif %}"
    "{% set ns.system = ns.system + m['content'] %}{% endif %}{% endfor %}"
    "{{ bos_token }}{{ ns.system }}"
    "{% for m in messages %}"
    "{% if m['role'] == 'user' %}{{ '<｜User｜>' + m['content'] }}"
    "{% elif m['role'] == 'assistant' %}{{ '<｜Assistant｜>' + m['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}"
)

ROLE = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bing": "assistant",
        "bard": "assistant", "assistant": "assistant", "system": "system"}


def to_messages(conv: list[dict]) -> list[dict]:
    out = []
    for turn in conv:
        role = ROLE.get(turn.get("from"))
        text = (turn.get("value") or "").strip()
        if role and text:
            out.append({"role": role, "content": text})
    return out


def render(messages: list[dict], add_generation_prompt: bool = False) -> str:
    """Python twin of CHAT_TEMPLATE (checked against the jinja rendering in main())."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    s = BOS + system
    for m in messages:
        if m["role"] == "user":
            s += USER + m["content"]
        elif m["role"] == "assistant":
            s += ASSISTANT + m["content"] + EOS
    if add_generation_prompt:
        s += ASSISTANT
    return s


def mostly_ascii(text: str, thresh: float) -> bool:
    if not text:
        return False
    return sum(c < "\x80" for c in text) / len(text) >= thresh


def train_tokenizer(texts, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, ".data"))
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--tokenizer-sample-chars", type=int, default=40_000_000,
                    help="chars of training text used to learn the BPE merges")
    ap.add_argument("--max-train-tokens", type=int, default=20_000_000, help="uint16 tokens; 2 bytes each")
    ap.add_argument("--max-val-tokens", type=int, default=1_000_000)
    ap.add_argument("--max-prompt-tokens", type=int, default=384)
    ap.add_argument("--ascii-thresh", type=float, default=0.97, help="drop chats with less ASCII (non-English)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "tokenizer"), exist_ok=True)
    rng = random.Random(args.seed)
    t0 = time.time()

    train, held = [], []
    n_rec = n_drop = 0
    for rec in tqdm(iter_records(), desc="read ShareGPT", unit="rec"):
        n_rec += 1
        msgs = to_messages(rec["conversations"])
        if not any(m["role"] == "assistant" for m in msgs) or not mostly_ascii(
                "".join(m["content"] for m in msgs), args.ascii_thresh):
            n_drop += 1
            continue
        (held if is_held_out(rec["id"]) else train).append((rec["id"], msgs))
    print(f"records {n_rec}, dropped {n_drop}, train {len(train)}, held-out {len(held)}")

    train_texts = [render(m) for _, m in train]
    held_texts = [render(m) for _, m in held]

    # BPE merges from a random sample of training chats.
    order = list(range(len(train_texts)))
    rng.shuffle(order)
    sample, n = [], 0
    for i in order:
        if n >= args.tokenizer_sample_chars:
            break
        sample.append(train_texts[i])
        n += len(train_texts[i])
    print(f"training BPE (vocab {args.vocab_size}) on {len(sample)} chats / {n / 1e6:.1f}M chars")
    tok = train_tokenizer(sample, args.vocab_size)
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    tok_dir = os.path.join(args.out, "tokenizer")
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": EOS,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 2048,
        "legacy": True,
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tok_cfg, f, indent=2, ensure_ascii=False)

    # The Python renderer must agree with the jinja template.
    import jinja2
    tmpl = jinja2.Environment().from_string(CHAT_TEMPLATE)
    for _, m in train[:200] + held[:50]:
        for gen in (False, True):
            assert tmpl.render(messages=m, bos_token=BOS, eos_token=EOS, add_generation_prompt=gen) == \
                render(m, gen)

    def encode_all(texts, desc):
        ids = []
        for i in tqdm(range(0, len(texts), 256), desc=desc, unit="x256"):
            ids.extend(e.ids for e in tok.encode_batch(texts[i:i + 256], add_special_tokens=False))
        return ids

    train_ids = encode_all(train_texts, "tokenize train")
    total = sum(map(len, train_ids))
    print(f"train tokens {total / 1e6:.2f}M ({sum(map(len, train_texts)) / max(total, 1):.2f} chars/token)")
    # Subsample whole chats (random, seeded) down to the token cap, keeping file order.
    keep = list(range(len(train_ids)))
    if total > args.max_train_tokens:
        rng.shuffle(keep)
        acc, chosen = 0, []
        for i in keep:
            if acc + len(train_ids[i]) <= args.max_train_tokens:
                chosen.append(i)
                acc += len(train_ids[i])
        keep = sorted(chosen)
    docs = np.zeros(len(keep), dtype=np.int64)
    stream = np.empty(sum(len(train_ids[i]) for i in keep), dtype=np.uint16)
    p = 0
    for j, i in enumerate(keep):
        docs[j] = p
        stream[p:p + len(train_ids[i])] = train_ids[i]
        p += len(train_ids[i])
    stream.tofile(os.path.join(args.out, "train.bin"))
    np.save(os.path.join(args.out, "train_docs.npy"), docs)
    print(f"kept {len(keep)} chats, {len(stream) / 1e6:.2f}M tokens -> train.bin ({stream.nbytes / 2**20:.1f} MiB)")

    held_ids = encode_all(held_texts, "tokenize held-out")
    val = np.concatenate([np.asarray(x, dtype=np.uint16) for x in held_ids])[: args.max_val_tokens]
    val.tofile(os.path.join(args.out, "val.bin"))

    prompts = []
    for rid, m in held:
        if m[0]["role"] != "user":  # continuation parts of split chats start mid-conversation
            continue
        text = render([m[0]], add_generation_prompt=True)
        ids = tok.encode(text, add_special_tokens=False).ids
        if 4 <= len(ids) <= args.max_prompt_tokens:
            prompts.append({"id": rid, "prompt": m[0]["content"], "text": text, "input_ids": ids})
    with open(os.path.join(args.out, "heldout_prompts.json"), "w", encoding="utf-8") as f:
        json.dump(prompts, f, ensure_ascii=False)
    meta = {
        "vocab_size": args.vocab_size, "bos_token_id": 0, "eos_token_id": 1, "user_token_id": 2,
        "assistant_token_id": 3, "train_chats": len(keep), "train_tokens": int(len(stream)),
        "val_tokens": int(len(val)), "heldout_prompts": len(prompts), "records_read": n_rec,
        "records_dropped": n_drop, "held_out_chats": len(held), "seed": args.seed,
        "ascii_thresh": args.ascii_thresh,
    }
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(json.dumps(meta, indent=2))
    print(f"done in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
