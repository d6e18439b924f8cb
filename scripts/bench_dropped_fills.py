"""What dropping a sequence's waiting MTP fills costs in acceptance once it drafts again (DraftPlan::drop).

Greedy chat prompts in one batch, k forced per step: k_max for --drafting steps, then k = 0 for --waiting steps,
then k_max to the end. In the k = 0 stretch the fills wait in the stash; there the run "dropped" is forced past
the break-even (stashes that fill are dropped: holes in the MTP cache) and the run "caught up" is not (they are
caught up). A third run stops drafting after the first stretch: its counts are the first stretch's, so the
resumed stretch's acceptance is the difference. The outputs of the first two are the same (drafts change speed,
never tokens); what holes cost is the resumed stretch's acceptance, dropped against caught up.

  .venv/bin/python scripts/bench_dropped_fills.py --batch-size 8 --waiting 96
"""
from __future__ import annotations

import argparse
import json

from mtpserve import LLM, SamplingParams
from bench_offline import PROMPTS


def counts(llm: LLM, schedule: list[int], unpaid: list[bool], batch: int, max_tokens: int) -> tuple[list, dict]:
    llm.core.engine.force_k_schedule(schedule, unpaid)
    before = llm.stats()
    messages = [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(batch)]
    outputs = llm.chat(messages, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True))
    after = llm.stats()
    return [o.outputs[0].token_ids for o in outputs], {
        "draft_tokens": after.spec.draft_tokens - before.spec.draft_tokens,
        "accepted_tokens": after.spec.accepted_tokens - before.spec.accepted_tokens,
        "dropped_positions": after.dropped_positions - before.dropped_positions,
        "caught_up_positions": after.caught_up_positions - before.caught_up_positions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--k-max", type=int, default=3)
    parser.add_argument("--drafting", type=int, default=12, help="steps at k_max before the k = 0 stretch")
    parser.add_argument("--waiting", type=int, default=96, help="steps at k = 0 (the stash holds 64 positions)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--deferred-fill-positions", type=int, default=64)
    args = parser.parse_args()
    llm = LLM(dtype="float32", num_speculative_tokens=args.k_max, speculative_policy="adaptive",
              deferred_fill_positions=args.deferred_fill_positions)
    # Schedules repeat: each is longer than a run has steps.
    first, waiting, rest = [args.k_max] * args.drafting, [0] * args.waiting, args.max_tokens
    dropping = [False] * args.drafting + [True] * args.waiting + [False] * rest
    try:
        runs = {
            "first stretch only": counts(llm, first + [0] * (args.waiting + rest), [False], args.batch_size,
                                         args.max_tokens),
            "caught up": counts(llm, first + waiting + [args.k_max] * rest, [False], args.batch_size, args.max_tokens),
            "dropped": counts(llm, first + waiting + [args.k_max] * rest, dropping, args.batch_size, args.max_tokens),
        }
    finally:
        llm.shutdown()
    first_counts = runs["first stretch only"][1]
    result = {"config": vars(args), "same_outputs": runs["caught up"][0] == runs["dropped"][0], "runs": {}}
    print("| run | acceptance, first stretch | acceptance, resumed stretch | drafts resumed | positions dropped | "
          "positions caught up |\n|---|---:|---:|---:|---:|---:|")
    for name in ("caught up", "dropped"):
        c = runs[name][1]
        drafts = c["draft_tokens"] - first_counts["draft_tokens"]
        resumed = (c["accepted_tokens"] - first_counts["accepted_tokens"]) / drafts
        first_rate = first_counts["accepted_tokens"] / first_counts["draft_tokens"]
        result["runs"][name] = {**c, "first_acceptance": first_rate, "resumed_acceptance": resumed}
        print(f"| {name} | {first_rate:.3f} | {resumed:.3f} | {drafts} | {c['dropped_positions']} | "
              f"{c['caught_up_positions']} |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
