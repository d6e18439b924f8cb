#!/usr/bin/env python3
"""What the adaptive policy did for one batch of new requests after another, in one engine (a script, not a test).

Each line is one chat call over `--batch` requests: its decode steps at each k, the steps that skipped the MTP
fill, the sequences retired from drafting and the drafts accepted. Runs of `--max-tokens` show the steady state once the batch's
bucket is warm; the short runs after them show after how many steps the sequences retire.

  python3 scripts/trace_adaptive_steps.py --devices cuda:0 --dtype bfloat16 --batch 8 --temperature 1.5

With --against-k0 an engine without MTP runs each call too, right after: each line adds both wall times and the
adaptive engine's target / sampling / drafting milliseconds per step against k = 0's (where the gap goes, run by run).
"""
import argparse

from bench_offline import counters, ms_per_step, timed_chat
from mtpserve import LLM, SamplingParams

PROMPTS = ["Tell me about the sea.", "Write a haiku about autumn.", "Explain how a transistor works.",
           "Why is the sky blue?"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--temperature", type=float, default=1.5)
    parser.add_argument("--k-max", type=int, default=3)
    parser.add_argument("--deferred-fill-positions", type=int, default=None,
                        help="the engine's (default: the engine's for --devices; 0: the MTP fill runs every step)")
    parser.add_argument("--runs", type=int, default=4, help="runs of --max-tokens")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--short", type=int, nargs="*", default=[4, 8, 12, 16, 24, 32], help="then one run of each")
    parser.add_argument("--against-k0", action="store_true", help="time an engine without MTP on each call too")
    args = parser.parse_args()
    llm = LLM(devices=args.devices, dtype=args.dtype, num_speculative_tokens=args.k_max,
              speculative_policy="adaptive", deferred_fill_positions=args.deferred_fill_positions,
              max_cache_blocks=512)
    plain = LLM(devices=args.devices, dtype=args.dtype, max_cache_blocks=512) if args.against_k0 else None
    print(f"batch {args.batch}, temperature {args.temperature}, k_max {args.k_max}, "
          f"deferred_fill_positions {llm.core.args.deferred_fill_positions}")
    for tokens in [8] + [args.max_tokens] * args.runs + args.short:  # a short first run: most of the bucket's warm-up
        params = SamplingParams(temperature=args.temperature, max_tokens=tokens, ignore_eos=True)
        _, wall, before, after, _ = timed_chat(llm, PROMPTS, args.batch, params)
        c = counters(before, after)
        line = (f"max_tokens {tokens:4d}: steps {c['steps']:4d}, decode steps by k {c['steps_by_k']}, "
                f"fill skipped {c['fill_skipped_steps']:4d}, retired {c['retired']}, "
                f"drafts accepted {c['accepted_tokens']}/{c['draft_tokens']}")
        if plain:
            _, plain_wall, plain_before, plain_after, _ = timed_chat(plain, PROMPTS, args.batch, params)
            line += (f", wall {1e3 * wall:.1f} ms against k = 0's {1e3 * plain_wall:.1f} ({plain_wall / wall:.3f}x), "
                     f"ms per step target / sampling / drafting {per_step(before, after)} "
                     f"against {per_step(plain_before, plain_after)}")
        print(line, flush=True)
    for engine in (llm, plain):
        if engine:
            engine.shutdown()


def per_step(before, after) -> str:
    return " / ".join(f"{ms:.3f}" for ms in ms_per_step(before, after).values())


if __name__ == "__main__":
    main()
