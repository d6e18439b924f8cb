"""How often greedy MTP changes tokens against k = 0: for each k and batch size, the fraction of a fixed
prompt set whose greedy output differs from the k = 0 output of the same batch size, and where the first
difference falls. In float32 the answer should be 0 (or near-ties); in bf16 the verify step (k + 1 rows
per sequence) rounds differently from a decode step, which this measures.

    python scripts/mtp_divergence.py --devices cuda:0 --dtype bfloat16 --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from mtpserve import LLM, SamplingParams
from mtpserve.engine_args import SPECULATIVE_POLICIES, EngineArgs

TOPICS = ["the ocean", "a city at night", "learning to cook", "the history of chess", "mountain weather",
          "a small robot", "train travel", "an old library"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", default="auto")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--batch-invariant", action="store_true", help="run the engine with --batch_invariant")
    p.add_argument("--speculative-policy", choices=SPECULATIVE_POLICIES, default=EngineArgs.speculative_policy,
                   help="the engine's --speculative_policy for k = 1..3 (default: %(default)s)")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    prompts = [f"Tell me about {TOPICS[i % len(TOPICS)]}, part {i}." for i in range(args.prompts)]
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    outputs = {}
    for k in [0, *args.ks]:
        llm = LLM(devices=args.devices, dtype=args.dtype, num_speculative_tokens=k, max_cache_blocks=1024,
                  batch_invariant=args.batch_invariant, speculative_policy=args.speculative_policy)
        for batch in args.batches:
            tokens = []
            for start in range(0, len(prompts), batch):
                tokens += [o.outputs[0].token_ids for o in llm.generate(prompts[start:start + batch], params)]
            outputs[k, batch] = tokens
        llm.core.shutdown()
        del llm
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    rows = []
    for k in args.ks:
        for batch in args.batches:
            firsts = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), None)
                      for x, y in zip(outputs[0, batch], outputs[k, batch])]
            diverged = [i for i in firsts if i is not None]
            rows.append(dict(k=k, batch=batch, prompts=len(prompts), diverged=len(diverged),
                             rate=len(diverged) / len(prompts), first_divergence=sorted(diverged)))
    # Batch invariance at k = 0: the same prompts alone and in batches.
    for batch in args.batches[1:]:
        same = sum(a == b for a, b in zip(outputs[0, args.batches[0]], outputs[0, batch]))
        rows.append(dict(k=0, batch=batch, prompts=len(prompts), diverged=len(prompts) - same,
                         rate=1 - same / len(prompts), first_divergence=[], versus=f"batch {args.batches[0]}"))
    print(f"| k | batch | differs from | sequences differing | rate |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['k']} | {r['batch']} | {r.get('versus', 'k = 0')} | {r['diverged']} / {r['prompts']} | "
              f"{r['rate']:.3f} |")
    mode = "_batch_invariant" if args.batch_invariant else ""
    out = Path(args.out) / f"mtp_divergence_{args.dtype}{mode}_{args.speculative_policy}.json"
    out.write_text(json.dumps(dict(args=vars(args), rows=rows), indent=1))


if __name__ == "__main__":
    main()
