"""Wall per step at T = 1.5, batch 64, k = 0 and adaptive engines, three instances each, in this process."""
import os, sys, time
import torch
from mtpserve import LLM, SamplingParams

PROMPTS = ["Tell me about the sea.", "Write a haiku about autumn.", "Explain how a transistor works.", "Why is the sky blue?"]
prompts = [PROMPTS[i % 4] for i in range(64)]
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
    print(f"{sys.argv[1]:10s} {name:10s} ms/step {' '.join(f'{1e3*w:.3f}' for w in walls)}", flush=True)
    llm.shutdown()

for _ in range(2):
    measure("k0")
    measure("adaptive", num_speculative_tokens=3, speculative_policy="adaptive")
