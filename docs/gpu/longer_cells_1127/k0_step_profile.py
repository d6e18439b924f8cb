"""Where a step of k = 0 spends its time at temperature 1.5, batch 64: a k = 0 engine against an adaptive one whose
sequences have all retired. One mode per run:
  kernels    GPU kernel time per step, kernel by kernel (torch.profiler), and the host calls that differ
  launches   wall time per step and host time per cudaGraphLaunch, across engine configurations
  instances  wall time per step of k = 0 and adaptive engines, two of each, alternating in this process
"""
import collections
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from mtpserve import LLM, SamplingParams

PROMPTS = ["Tell me about the sea.", "Write a haiku about autumn.", "Explain how a transistor works.", "Why is the sky blue?"]
BATCH = [PROMPTS[i % 4] for i in range(64)]
PARAMS = SamplingParams(temperature=1.5, max_tokens=128, ignore_eos=True)
ADAPTIVE = {"num_speculative_tokens": 3, "speculative_policy": "adaptive"}


def warm_engine(**overrides) -> LLM:
    llm = LLM(devices="cuda:0", dtype="bfloat16", max_cache_blocks=512, **overrides)
    for _ in range(4):
        llm.generate(BATCH, PARAMS)
    return llm


def ms_per_step(llm: LLM) -> float:
    steps = llm.stats().steps
    torch.cuda.synchronize()
    start = time.perf_counter()
    llm.generate(BATCH, PARAMS)
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - start) / (llm.stats().steps - steps)


def profiled(llm: LLM, activities) -> profile:
    with profile(activities=activities) as prof:
        llm.generate(BATCH, PARAMS)
        torch.cuda.synchronize()
    return prof


def kernels() -> None:
    per_step = {}
    for name, overrides in (("k0", {}), ("adaptive", ADAPTIVE)):
        llm = warm_engine(**overrides)
        print(f"{name}: {ms_per_step(llm):.3f} ms/step", flush=True)
        steps = llm.stats().steps
        prof = profiled(llm, [ProfilerActivity.CUDA, ProfilerActivity.CPU])
        steps = llm.stats().steps - steps
        gpu, host = collections.Counter(), collections.Counter()
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                gpu[e.name] += e.device_time_total / steps
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CPU:
                host[e.key] = e.cpu_time_total
        per_step[name] = (gpu, host)
        llm.shutdown()
    (gk, hk), (ga, ha) = per_step["k0"], per_step["adaptive"]
    print(f"{'kernel':90s} {'k0 us/step':>10s} {'ad us/step':>10s}")
    for n in sorted(set(gk) | set(ga), key=lambda n: -(gk[n] + ga[n])):
        print(f"{n[:90]:90s} {gk[n]:10.2f} {ga[n]:10.2f}")
    print(f"total us/step: k0 {sum(gk.values()):.1f}, adaptive {sum(ga.values()):.1f}")
    print("host calls, total us over the run, largest differences first:")
    for n in sorted(set(hk) | set(ha), key=lambda n: -abs(ha[n] - hk[n]))[:12]:
        print(f"  {n[:70]:70s} k0 {hk[n]:10.0f}  adaptive {ha[n]:10.0f}")


def launches() -> None:
    configs = [("k0", {}), ("adaptive k_max 3", ADAPTIVE), ("k0 again", {}),
               ("adaptive k_max 1", {**ADAPTIVE, "num_speculative_tokens": 1}),
               ("adaptive k_max 3, graph_max_batch 64", {**ADAPTIVE, "graph_max_batch": 64}),
               ("k0, graph_max_batch 64", {"graph_max_batch": 64})]
    for name, overrides in configs:
        llm = warm_engine(**overrides)
        walls = " ".join(f"{ms_per_step(llm):.3f}" for _ in range(3))
        launch = [e for e in profiled(llm, [ProfilerActivity.CPU]).key_averages() if e.key == "cudaGraphLaunch"]
        per = launch[0].cpu_time_total / launch[0].count if launch else float("nan")
        print(f"{name:40s} graphs {llm.core.engine.num_graphs():4d} ms/step {walls}  us per cudaGraphLaunch {per:.1f}",
              flush=True)
        llm.shutdown()


def instances() -> None:
    for _ in range(2):
        for name, overrides in (("k0", {}), ("adaptive", ADAPTIVE)):
            llm = warm_engine(**overrides)
            print(f"{name:10s} ms/step {' '.join(f'{ms_per_step(llm):.3f}' for _ in range(3))}", flush=True)
            llm.shutdown()


if __name__ == "__main__":
    {"kernels": kernels, "launches": launches, "instances": instances}[sys.argv[1]]()
