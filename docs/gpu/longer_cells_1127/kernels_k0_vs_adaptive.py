"""Per-kernel GPU time per step, k = 0 engine vs adaptive engine (all retired), T = 1.5, batch 64."""
import collections, sys, time
import torch
from torch.profiler import ProfilerActivity, profile
from mtpserve import LLM, SamplingParams

PROMPTS = ["Tell me about the sea.", "Write a haiku about autumn.", "Explain how a transistor works.", "Why is the sky blue?"]
batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
prompts = [PROMPTS[i % 4] for i in range(batch)]
params = SamplingParams(temperature=1.5, max_tokens=128, ignore_eos=True)

def run(llm, name):
    for _ in range(4):
        llm.generate(prompts, params)
    s0 = llm.stats()
    torch.cuda.synchronize()
    t = time.perf_counter()
    llm.generate(prompts, params)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t
    s1 = llm.stats()
    steps = s1.steps - s0.steps
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        llm.generate(prompts, params)
        torch.cuda.synchronize()
    per = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name][0] += 1
            per[e.name][1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    cpu = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CPU:
            cpu[e.key] = [e.count, e.cpu_time_total]
    print(f"== {name}: wall {wall*1e3:.1f} ms, {steps} steps, {wall/steps*1e3:.3f} ms/step")
    return per, cpu, steps

k0 = LLM(devices="cuda:0", dtype="bfloat16", max_cache_blocks=512)
ad = LLM(devices="cuda:0", dtype="bfloat16", num_speculative_tokens=3, speculative_policy="adaptive", max_cache_blocks=512)
a, ac, sa = run(k0, "k0")
b, bc, sb = run(ad, "adaptive")
a, ac, sa = run(k0, "k0 again")
print(f"{'kernel':90s} {'k0 n':>6s} {'k0 us/step':>10s} {'ad n':>6s} {'ad us/step':>10s}")
rows = sorted(set(a) | set(b), key=lambda n: -(b.get(n, [0, 0])[1] / sb + a.get(n, [0, 0])[1] / sa))
ta = tb = 0
for n in rows:
    x, y = a.get(n, [0, 0]), b.get(n, [0, 0])
    ta += x[1] / sa; tb += y[1] / sb
    print(f"{n[:90]:90s} {x[0]:6d} {x[1]/sa:10.2f} {y[0]:6d} {y[1]/sb:10.2f}")
print(f"total us/step: k0 {ta:.1f}, adaptive {tb:.1f}")
print("CPU ops (count, total us) differing:")
for n in sorted(set(ac) | set(bc), key=lambda n: -abs(bc.get(n, [0, 0])[1] - ac.get(n, [0, 0])[1]))[:25]:
    print(f"  {n[:70]:70s} k0 {ac.get(n,[0,0])[0]:6d} {ac.get(n,[0,0])[1]:10.0f}  ad {bc.get(n,[0,0])[0]:6d} {bc.get(n,[0,0])[1]:10.0f}")
