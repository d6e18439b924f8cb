"""Where a decode step's time goes, engine by engine: the embedded model at one batch size, for k = 0, fixed k
(--ks) and the adaptive policy (--adaptive-k-max), each with CUDA graphs off, on or both (--graphs).

Every engine is built first and all stay alive, as in scripts/bench_offline.py, whose prompts and chat calls this
uses. Then --calls generate calls per engine, the engines taking turns, give the engine's counters per step as
medians: the step's wall time, the target forward's device span, the sampling (from the target's launch until the
tokens are on the host, so the target's device time is inside it), the drafting's device span, and the rest of the
step on the host (before the target's launch and after the sampling). Then one more call per engine under
torch.profiler: the device's kernels per step (count, mean and total time) and the host's CUDA runtime calls per step
(graph launches against kernel launches, copies, synchronizations). The profiler inflates those host times, alike for
every engine.

  python3 scripts/profile_decode.py --batch 32 --temperature 1.5 --ks 0 --adaptive-k-max 3 --graphs on --tokens 128
"""
from __future__ import annotations

import argparse
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from bench_offline import PROMPTS, ms_per_step, timed_chat
from gpu_timing import host_table, kernel_table
from mtpserve import LLM, SamplingParams


def counters_per_step(llm: LLM, batch: int, params: SamplingParams) -> dict:
    """One call's engine counters, ms per step, with the host's rest of the step."""
    _, _, before, after, _ = timed_chat(llm, PROMPTS, batch, params)
    ms = ms_per_step(before, after)
    ms["rest_seconds"] = ms["step_seconds"] - ms["sample_seconds"] - ms["draft_seconds"]
    return ms


def profiled_call(llm: LLM, batch: int, params: SamplingParams, top: int) -> list[str]:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    # The engine steps on a thread of its own: without profile_all_threads only the caller's ops are recorded.
    config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    steps_before = llm.stats().steps
    with profile(activities=activities, experimental_config=config) as prof:
        timed_chat(llm, PROMPTS, batch, params)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    steps = llm.stats().steps - steps_before
    lines = [f"One more call under torch.profiler: {steps} steps", ""]
    if torch.cuda.is_available():
        lines += kernel_table(prof, top, steps) + [""]
    return lines + host_table(prof, top, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="cuda:0")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--ks", type=int, nargs="*", default=[0], help="k = 0 and fixed-policy k's")
    parser.add_argument("--adaptive-k-max", type=int, nargs="*", default=[],
                        help="also the adaptive policy with each of these k_max")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    parser.add_argument("--graphs", choices=("off", "on", "both"), default="both")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per engine before the profiled one")
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args()
    graph_modes = {"off": [False], "on": [True], "both": [False, True]}[args.graphs]
    methods = [(k, "fixed", g) for k in args.ks for g in graph_modes]
    methods += [(k, "adaptive", g) for k in args.adaptive_k_max for g in graph_modes]
    llms = {m: LLM(devices=args.devices, dtype=args.dtype, num_speculative_tokens=m[0], speculative_policy=m[1],
                   max_cache_blocks=512, enable_graph=m[2]) for m in methods}
    params = SamplingParams(temperature=args.temperature, max_tokens=args.tokens, ignore_eos=True)
    warm_up = SamplingParams(temperature=args.temperature, max_tokens=8, ignore_eos=True)
    runs = {m: [] for m in methods}
    try:
        for llm in llms.values():
            timed_chat(llm, PROMPTS, args.batch, warm_up)
        for _ in range(args.calls):
            for m, llm in llms.items():
                runs[m].append(counters_per_step(llm, args.batch, params))
        sections = []
        for (k, policy, graphs), llm in llms.items():
            rs = runs[(k, policy, graphs)]
            median = {name: statistics.median(r[name] for r in rs) for name in rs[0]}
            sections.append("\n".join([
                f"## k = {k}, {policy}, graphs {'on' if graphs else 'off'}: batch {args.batch}, temperature "
                f"{args.temperature}, {args.tokens} tokens; ms per step, medians of {args.calls} calls",
                "| step | target (device) | sampling (from the launch) | drafting (device) | rest (host) |",
                "|---:|---:|---:|---:|---:|",
                f"| {median['step_seconds']:.4f} | {median['target_seconds']:.4f} | {median['sample_seconds']:.4f} | "
                f"{median['draft_seconds']:.4f} | {median['rest_seconds']:.4f} |", "",
                *profiled_call(llm, args.batch, params, args.top)]))
    finally:
        for llm in llms.values():
            llm.shutdown()
    report = "\n\n".join(sections)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
