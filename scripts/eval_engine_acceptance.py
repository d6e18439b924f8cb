"""MTP acceptance of a model measured by mtpserve's engine: greedy, k drafts every step (fixed policy), on
held-out ShareGPT prompts (the same 200 prompts as scripts/eval_tiny_mtp.py), engine-wide counters; for each
draft position, its acceptance given that the drafts before it were accepted."""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from eval_tiny_mtp import load_prompts  # noqa: E402

from mtpserve import LLM, SamplingParams  # noqa: E402
from mtpserve.engine_args import DEFAULT_MODEL  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--prompts", default=".data/heldout_prompts.json")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("-k", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[128, 32])
    args = parser.parse_args()
    prompts = [p["input_ids"] for p in load_prompts(args.prompts, args.model, args.n)]
    for max_tokens in args.max_tokens:
        llm = LLM(args.model, dtype="float32", num_speculative_tokens=args.k, speculative_policy="fixed",
                  max_cache_blocks=2048)
        outputs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=max_tokens))
        spec = llm.stats().spec
        llm.shutdown()
        print(json.dumps({"prompts": len(prompts), "k": args.k, "max_tokens": max_tokens,
                          "generated": sum(len(o.outputs[0].token_ids) for o in outputs),
                          "drafts": spec.drafts, "draft_tokens": spec.draft_tokens, "accepted": spec.accepted_tokens,
                          "acceptance_rate": round(spec.accepted_tokens / spec.draft_tokens, 4),
                          "mean_acceptance_length": round(1 + spec.accepted_tokens / spec.drafts, 4),
                          "conditional_acceptance_per_position": conditional(spec)}))


def conditional(spec) -> list[float]:
    """[j]: drafts accepted at position j over drafts that reached it (position j - 1 accepted)."""
    reached = [spec.drafts] + list(spec.accepted_per_position[:-1])
    return [round(a / r, 4) if r else None for a, r in zip(spec.accepted_per_position, reached)]


if __name__ == "__main__":
    main()
