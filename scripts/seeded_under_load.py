"""Does a seeded sampled request give the same tokens alone and under load? 20 seeded requests are run one
at a time, then the same 20 again, each batched with 32 other concurrent requests (other prompts, other
lengths, some greedy), for MTP k = 0 and k = 2, with --batch_invariant on and off.

    python scripts/seeded_under_load.py --dtype bfloat16
"""
from __future__ import annotations

import argparse

from mtp_divergence import TOPICS  # the same prompt topics (scripts/ is on the path when run)
from mtpserve import LLM, SamplingParams


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", default="auto")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--max-tokens", type=int, default=64)
    args = p.parse_args()
    seeded = [f"Write about {TOPICS[i % len(TOPICS)]}, take {i}." for i in range(20)]
    others = [f"Question {i}: what do you know about {TOPICS[(3 * i) % len(TOPICS)]}?" * (1 + i % 3) for i in range(32)]
    print("| k | batch_invariant | seeded requests equal alone and under load |\n|---|---|---|")
    for invariant in (False, True):
        for k in (0, 2):
            llm = LLM(devices=args.devices, dtype=args.dtype, num_speculative_tokens=k, batch_invariant=invariant,
                      max_cache_blocks=1024)
            params = [SamplingParams(temperature=0.8, seed=1000 + i, max_tokens=args.max_tokens, ignore_eos=True)
                      for i in range(len(seeded))]
            alone = [llm.generate(prompt, sp)[0].outputs[0].token_ids for prompt, sp in zip(seeded, params)]
            load = [SamplingParams(temperature=0 if i % 4 == 0 else 1.0, max_tokens=args.max_tokens + 7 * i,
                                   ignore_eos=True) for i in range(len(others))]
            batch = llm.generate(seeded + others, params + load)
            equal = sum(a == b.outputs[0].token_ids for a, b in zip(alone, batch))
            print(f"| {k} | {invariant} | {equal} / {len(seeded)} |", flush=True)
            llm.shutdown()


if __name__ == "__main__":
    main()
