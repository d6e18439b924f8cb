#!/usr/bin/env python3
"""Greedy k=1 MTP acceptance of the tiny DeepSeek-V3 model on held-out ShareGPT prompts (pure PyTorch).

For each prompt the main model generates greedily (KV-cached). After each main token x_n, the MTP layer drafts
x_{n+1} from (embed(x_n), h_{n-1}); the draft is accepted when the main model then produces that token.
  per-step acceptance = accepted / drafts over every generated position;
  spec-decode simulation = real k=1 speculative decoding over the same greedy output (after an accepted draft
  the main model's bonus token is emitted and the next draft skips a position): acceptance rate and mean
  acceptance length (tokens emitted per main-model verify step, = 1 + acceptance rate).
Greedy replies of a model this small fall into loops, which are easy to draft; acceptance over the first
--early generated tokens is reported too.

  .venv/bin/python scripts/eval_tiny_mtp.py --model models/tiny-dsv3-mtp --n 200 --max-new-tokens 128
  .venv/bin/python scripts/eval_tiny_mtp.py --model models/tiny-dsv3-mtp --check-hf   # logits vs transformers
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from train_tiny_model import load_hf_dir  # noqa: E402


def load_prompts(path: str, model_dir: str, n: int):
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)[:n]
    # Rebuild with the same rule as prepare_tiny_data.py (held-out chats whose first turn is the user's).
    sys.path.insert(0, os.path.join(REPO, "python"))
    from tokenizers import Tokenizer
    from mtpserve.sharegpt import iter_records, is_held_out
    from prepare_tiny_data import mostly_ascii, render, to_messages
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    out = []
    for rec in iter_records():
        if not is_held_out(rec["id"]):
            continue
        m = to_messages(rec["conversations"])
        if not m or not any(x["role"] == "assistant" for x in m) or \
                not mostly_ascii("".join(x["content"] for x in m), 0.97) or m[0]["role"] != "user":
            continue
        text = render([m[0]], add_generation_prompt=True)
        ids = tok.encode(text, add_special_tokens=False).ids
        if 4 <= len(ids) <= 384:
            out.append({"id": rec["id"], "prompt": m[0]["content"], "text": text, "input_ids": ids})
        if len(out) >= n:
            break
    return out


@torch.no_grad()
def generate_with_drafts(model, ids: list[int], max_new: int, eos: int, device):
    L = model.cfg.num_hidden_layers
    caches, mtp_cache = [dict() for _ in range(L)], {}
    x = torch.tensor([ids], device=device)
    n = x.shape[1]
    h, logits, _, _ = model.forward_main(x, 0, caches)
    tok = int(logits[0, -1].argmax())
    nxt = torch.cat([x[:, 1:], torch.tensor([[tok]], device=device)], dim=1)
    _, ml, _, _ = model.forward_mtp(nxt, h, 1, mtp_cache)
    draft = int(ml[0, -1].argmax())
    gen, acc, pos = [tok], [], n
    while len(gen) < max_new and tok != eos:
        h, logits, _, _ = model.forward_main(torch.tensor([[tok]], device=device), pos, caches)
        new = int(logits[0, -1].argmax())
        acc.append(draft == new)
        gen.append(new)
        _, ml, _, _ = model.forward_mtp(torch.tensor([[new]], device=device), h, pos + 1, mtp_cache)
        draft = int(ml[0, -1].argmax())
        tok, pos = new, pos + 1
    return gen, acc


def simulate_spec(acc: list[bool]):
    """k=1 speculative decoding over the same greedy sequence: returns (verify_steps, accepted)."""
    j = steps = accepted = 0
    while j < len(acc):
        steps += 1
        if acc[j]:
            accepted += 1
            j += 2
        else:
            j += 1
    return steps, accepted


@torch.no_grad()
def check_hf(model_dir: str, prompts, device):
    """Compare logits (main and MTP) with transformers' DeepseekV3ForCausalLM / MtpModel in float32."""
    from transformers import AutoTokenizer, DeepseekV3ForCausalLM
    DeepseekV3ForCausalLM._keys_to_ignore_on_load_unexpected = [r"model\.layers\.8\..*"]
    hf = DeepseekV3ForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ours = load_hf_dir(model_dir, torch.float32, "cpu")
    tok = AutoTokenizer.from_pretrained(model_dir)
    print(f"HF config: rope {hf.config.rope_parameters}, rsf {hf.config.routed_scaling_factor}, "
          f"num_mtp_layers {getattr(hf.config, 'num_mtp_layers', None)}")
    worst = 0.0
    for p in prompts:
        chat = tok.apply_chat_template([{"role": "user", "content": p["prompt"]}], add_generation_prompt=True,
                                       tokenize=False)
        assert chat == p["text"], "chat template mismatch"
        ids = tok(chat, add_special_tokens=False)["input_ids"]
        assert ids == p["input_ids"], "tokenizer mismatch"
        x = torch.tensor([ids])
        ref = hf(x).logits
        h, mine, _, _ = ours.forward_main(x)
        rel = ((mine - ref).abs().max() / ref.abs().max()).item()
        worst = max(worst, rel)
        print(f"  main logits  len {len(ids):4d}  max rel err {rel:.2e}  argmax agree "
              f"{(mine.argmax(-1) == ref.argmax(-1)).float().mean().item():.4f}")
    try:
        from transformers.modeling_layers import MtpModel
        mtp = MtpModel.from_pretrained(hf).eval()
        for p in prompts:
            x = torch.tensor([p["input_ids"]])
            out = hf.model(x)
            hh = out.last_hidden_state
            nxt = torch.cat([x[:, 1:], hf.lm_head(hh[:, -1:]).argmax(-1)], dim=1)
            pos = torch.arange(1, x.shape[1] + 1)[None]
            hm = mtp.forward_layer(0, hh, pos, None, input_ids=nxt)
            ref = mtp._project_to_logits(hm)
            h, _, _, _ = ours.forward_main(x)
            _, mine, _, _ = ours.forward_mtp(nxt, h, 1)
            rel = ((mine - ref).abs().max() / ref.abs().max()).item()
            worst = max(worst, rel)
            print(f"  MTP logits   len {x.shape[1]:4d}  max rel err {rel:.2e}")
    except Exception as e:  # report, don't hide
        print(f"  HF MtpModel comparison not run: {type(e).__name__}: {e}")
    # our KV-cached incremental path vs full-sequence path
    p = prompts[0]["input_ids"]
    caches, mc = [dict() for _ in range(ours.cfg.num_hidden_layers)], {}
    x = torch.tensor([p])
    h_full, l_full, _, _ = ours.forward_main(x)
    _, m_full, _, _ = ours.forward_mtp(x[:, 1:], h_full[:, :-1], 1)
    k = len(p) // 2
    h1, l1, _, _ = ours.forward_main(x[:, :k], 0, caches)
    h2, l2, _, _ = ours.forward_main(x[:, k:], k, caches)
    _, m1, _, _ = ours.forward_mtp(x[:, 1:k], h1[:, :k - 1], 1, mc)
    _, m2, _, _ = ours.forward_mtp(x[:, k:], torch.cat([h1[:, k - 1:], h2[:, :-1]], 1), k, mc)
    e1 = (torch.cat([l1, l2], 1) - l_full).abs().max().item()
    e2 = (torch.cat([m1, m2], 1) - m_full).abs().max().item()
    print(f"  cached vs full: main max abs err {e1:.2e}, MTP max abs err {e2:.2e}")
    print(f"worst relative error vs transformers: {worst:.2e}")
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(REPO, "models", "tiny-dsv3-mtp"))
    ap.add_argument("--prompts", default=os.path.join(REPO, ".data", "heldout_prompts.json"))
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--early", type=int, default=32,
                    help="also report acceptance over only the first N generated tokens (before greedy loops)")
    ap.add_argument("--show", type=int, default=4, help="print this many decoded replies")
    ap.add_argument("--check-hf", action="store_true", help="only compare logits with transformers")
    ap.add_argument("--json-out", default="")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = load_prompts(args.prompts, args.model, args.n)
    if args.check_hf:
        check_hf(args.model, prompts[:4], args.device)
        return
    device = torch.device(args.device)
    model = load_hf_dir(args.model, getattr(torch, args.dtype), device)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    eos = model.cfg.eos_token_id
    t0 = time.time()
    drafts = accepted = steps = spec_acc = gen_tokens = early_d = early_a = 0
    per_prompt, samples = [], []
    for i, p in enumerate(prompts):
        gen, acc = generate_with_drafts(model, p["input_ids"], args.max_new_tokens, eos, device)
        s, a = simulate_spec(acc)
        drafts += len(acc)
        accepted += sum(acc)
        steps += s
        spec_acc += a
        gen_tokens += len(gen)
        early_d += len(acc[:args.early - 1])
        early_a += sum(acc[:args.early - 1])
        per_prompt.append(sum(acc) / max(1, len(acc)))
        if i < args.show:
            samples.append((p["prompt"], tok.decode(gen, skip_special_tokens=False)))
        if (i + 1) % 20 == 0:
            print(f"  {i + 1}/{len(prompts)} prompts, running acceptance {accepted / max(1, drafts):.4f} "
                  f"({time.time() - t0:.0f}s)", flush=True)
    res = {
        "prompts": len(prompts), "generated_tokens": gen_tokens, "drafts": drafts, "accepted": accepted,
        "acceptance_rate": accepted / max(1, drafts),
        "spec_decode_acceptance_rate": spec_acc / max(1, steps),
        "spec_decode_mean_acceptance_length": (steps + spec_acc) / max(1, steps),
        "mean_per_prompt_acceptance": sum(per_prompt) / max(1, len(per_prompt)),
        f"acceptance_first_{args.early}_tokens": early_a / max(1, early_d),
        "max_new_tokens": args.max_new_tokens, "dtype": args.dtype, "seconds": time.time() - t0,
    }
    for q, a in samples:
        print("=" * 100)
        print("PROMPT:", q[:300].replace("\n", " "))
        print("REPLY :", a)
    print("=" * 100)
    print(json.dumps(res, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({**res, "samples": [{"prompt": q, "reply": a} for q, a in samples]}, f, indent=2)


if __name__ == "__main__":
    main()
