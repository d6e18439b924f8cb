"""Where a decode step's GPU time goes: the CUDA kernels of one step of the embedded model (bf16,
batch 1 by default), from torch.profiler, with graphs off (each launch visible) and on.

Prints, per mode, the kernels per step with their count and mean duration, the sum of kernel time per
step, and the wall time per step; writes the tables to --out.
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from gpu_timing import kernel_events
from mtpserve import LLM, SamplingParams


def profile_mode(graphs: bool, batch: int, k: int, tokens: int) -> str:
    llm = LLM(devices="cuda:0", dtype="bfloat16", num_speculative_tokens=k, enable_graph=graphs,
              max_cache_blocks=64, max_model_len=1024)
    prompts = [f"Tell me about the sea, part {i}." for i in range(batch)]
    params = SamplingParams(temperature=0, max_tokens=tokens, ignore_eos=True)
    llm.generate(prompts, params)  # warm-up
    steps_before = llm.stats().steps
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        llm.generate(prompts, params)
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    steps = llm.stats().steps - steps_before
    llm.shutdown()
    kernels = kernel_events(prof)
    total = sum(sum(v) for v in kernels.values())
    lines = [f"## graphs {'on' if graphs else 'off'}, batch {batch}, k {k}: {steps} steps, "
             f"{wall / steps * 1e3:.3f} ms wall/step, {total / steps / 1e3:.3f} ms kernel time/step, "
             f"{sum(len(v) for v in kernels.values()) / steps:.0f} kernels/step",
             "| kernel | per step | mean us | us/step |", "|---|---|---|---|"]
    for name, times in sorted(kernels.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {name[:90]} | {len(times) / steps:.1f} | {sum(times) / len(times):.2f} | "
                     f"{sum(times) / steps:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--k", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    report = "\n\n".join(profile_mode(graphs, args.batch, args.k, args.tokens) for graphs in (False, True))
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
