#!/usr/bin/env python3
"""Do identical engines run at the same speed? (a script, not a test)

Builds `--instances` engines with one configuration (fixed k = `--k`), then times `--repeats` offline calls of each
per batch size, the engines interleaved in a balanced order (as bench_offline.py interleaves its methods). Prints
each engine's TPOT per repeat and its median target / drafting milliseconds per step. The spread between the
engines' medians is the floor under any comparison of methods that runs one engine per method. With --profile, one
more call per engine at the last batch size runs under torch.profiler (scripts/profile_decode.py's tables), so the
kernels of a slow engine can be set beside a fast one's.

  python3 scripts/bench_engine_instances.py --devices cpu --dtype float32 --batch-sizes 1 8
  python3 scripts/bench_engine_instances.py --devices cuda:0 --dtype bfloat16 --batch-sizes 64 --instances 4 --profile
"""
import argparse
import statistics

from bench_offline import run
from mtpserve import LLM, SamplingParams
from mtpserve.bench.run_order import balanced_order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--profile", action="store_true", help="then one profiled call per engine")
    parser.add_argument("--top", type=int, default=40, help="rows of each profile table")
    args = parser.parse_args()
    llms = [LLM(devices=args.devices, dtype=args.dtype, num_speculative_tokens=args.k, speculative_policy="fixed",
                max_cache_blocks=512) for _ in range(args.instances)]
    for batch in args.batch_sizes:
        results = [[] for _ in llms]
        for rep in range(args.repeats):
            for i in balanced_order(list(range(len(llms))), rep):
                results[i].append(run(llms[i], batch, args.max_tokens, 0.0))
        for i, rs in enumerate(results):
            tpots = [r["tpot_ms"] for r in rs]
            print(f"batch {batch}, engine {i}: TPOT ms {' / '.join(f'{t:.2f}' for t in tpots)}, median "
                  f"{statistics.median(tpots):.2f}; per step, median target "
                  f"{statistics.median(r['target_ms_per_step'] for r in rs):.2f} ms, drafting "
                  f"{statistics.median(r['draft_ms_per_step'] for r in rs):.2f} ms", flush=True)
    if args.profile:
        from profile_decode import profiled_call  # imports torch.profiler: only when asked
        params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
        for i, llm in enumerate(llms):
            print(f"\n## engine {i}, batch {args.batch_sizes[-1]}\n", flush=True)
            print("\n".join(profiled_call(llm, args.batch_sizes[-1], params, args.top)), flush=True)
    for llm in llms:
        llm.shutdown()


if __name__ == "__main__":
    main()
