"""Host time per cudaGraphLaunch and wall per step at T = 1.5, batch 64, across engine configurations."""
import sys, time
import torch
from torch.profiler import ProfilerActivity, profile
from mtpserve import LLM, SamplingParams

PROMPTS = ["Tell me about the sea.", "Write a haiku about autumn.", "Explain how a transistor works.", "Why is the sky blue?"]
batch = 64
prompts = [PROMPTS[i % 4] for i in range(batch)]
params = SamplingParams(temperature=1.5, max_tokens=128, ignore_eos=True)

def measure(name, **kw):
    llm = LLM(devices="cuda:0", dtype="bfloat16", max_cache_blocks=512, **kw)
    for _ in range(4):
        llm.generate(prompts, params)
    walls = []
    for _ in range(3):
        s0 = llm.stats().steps
        torch.cuda.synchronize(); t = time.perf_counter()
        llm.generate(prompts, params)
        torch.cuda.synchronize(); walls.append((time.perf_counter() - t) / (llm.stats().steps - s0))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        llm.generate(prompts, params)
    launch = [e for e in prof.key_averages() if e.key == "cudaGraphLaunch"]
    per = launch[0].cpu_time_total / launch[0].count if launch else float("nan")
    print(f"{name:45s} graphs {getattr(llm.core.engine, 'num_graphs', lambda: -1)():>5} "
          f"ms/step {' '.join(f'{1e3*w:.3f}' for w in walls)}  us per cudaGraphLaunch {per:.1f}", flush=True)
    llm.shutdown()
    del llm
    torch.cuda.empty_cache()

measure("k0")
measure("adaptive k_max 3", num_speculative_tokens=3, speculative_policy="adaptive")
measure("k0 again")
measure("adaptive k_max 1", num_speculative_tokens=1, speculative_policy="adaptive")
measure("adaptive k_max 3, graph_max_batch 64", num_speculative_tokens=3, speculative_policy="adaptive", graph_max_batch=64)
measure("k0, graph_max_batch 64", graph_max_batch=64)
