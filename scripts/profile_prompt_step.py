"""Where a prompt step's time goes, with and without MTP: one request at a time (as at concurrency 1), each a
prompt of --prompt-tokens random tokens and 2 output tokens, so that every request runs one step with prompt
tokens (its prefill, then with MTP its fill and draft recursion) and one decode step.

On the GPU's serving sweeps, steps with prompt tokens cost the MTP methods about 1.4 ms more per request than
k = 0 at c = 1..4, and TTFT about 1.5 ms more (docs/benchmarks.md, 2026-11-29, twenty-first session). Per k this
prints, as medians over --requests requests: the TTFT, the prompt step's wall time and, from the engine's
counters, its target forward and its drafting (device span, and the host's part before the launch). Then, for one
more request under torch.profiler, the device's kernels of both steps (count and time, the largest first) and the
host's op calls, which tell graph replays from eager launches.

  python3 scripts/profile_prompt_step.py --devices cuda:0 --ks 0 3 --out $OUT/prompt_step.md
"""
from __future__ import annotations

import argparse
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from gpu_timing import host_table, kernel_table
from mtpserve import LLM, SamplingParams

COUNTERS = ("prompt_step_seconds", "step_seconds", "target_seconds", "draft_seconds", "draft_host_seconds")


def prompt_of(tokens: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(100, 1000, (tokens,), generator=g).tolist()


def one_request(llm: LLM, prompt: list[int]) -> dict:
    """A request's TTFT and the engine's counters over it, in ms."""
    before = llm.stats()
    [out] = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=2, ignore_eos=True))
    after = llm.stats()
    deltas = {name: 1e3 * (getattr(after, name) - getattr(before, name)) for name in COUNTERS}
    return {"ttft": 1e3 * out.metrics.time_to_first_token, **deltas}


def profile_k(args, k: int) -> str:
    llm = LLM(devices=args.devices, dtype=args.dtype, num_speculative_tokens=k, max_model_len=4 * args.prompt_tokens)
    try:
        for seed in range(3):  # warm-up: first kernels, cuBLAS's choices
            one_request(llm, prompt_of(args.prompt_tokens, seed))
        runs = [one_request(llm, prompt_of(args.prompt_tokens, 100 + i)) for i in range(args.requests)]
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        # The engine steps on a thread of its own: without profile_all_threads only the caller's ops are recorded.
        config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
        with profile(activities=activities, experimental_config=config) as prof:
            one_request(llm, prompt_of(args.prompt_tokens, 999))
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    finally:
        llm.shutdown()
    median = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    lines = [f"## k = {k}: {args.prompt_tokens}-token prompts, medians of {args.requests} requests, ms",
             "| TTFT | prompt step | both steps | target (both) | drafting (both) | drafting's host part (both) |",
             "|---:|---:|---:|---:|---:|---:|",
             f"| {median['ttft']:.3f} | {median['prompt_step_seconds']:.3f} | {median['step_seconds']:.3f} | "
             f"{median['target_seconds']:.3f} | {median['draft_seconds']:.3f} | {median['draft_host_seconds']:.3f} |",
             "", "One more request under torch.profiler (the prompt step and the decode step):", ""]
    if torch.cuda.is_available():
        lines += kernel_table(prof, args.top) + [""]
    return "\n".join(lines + host_table(prof, args.top))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--ks", type=int, nargs="+", default=[0, 3])
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    parser.add_argument("--out", default=None, help="also write the report here")
    args = parser.parse_args()
    report = "\n\n".join(profile_k(args, k) for k in args.ks)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
