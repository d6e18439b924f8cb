import re, sys, time, random
from mtpserve import LLM, SamplingParams
llm = LLM(None, num_speculative_tokens=int(sys.argv[1]))
rng = random.Random(7)
prompts = [[rng.randrange(5, 1000) for _ in range(32)] for _ in range(8)]
ps = SamplingParams(temperature=0, max_tokens=120, ignore_eos=True)
llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=20, ignore_eos=True))
out = []
for r in range(4):
    b = llm.stats()
    llm.generate(prompts, ps)
    a = llm.stats()
    out.append(f"{time.time():.1f}:{1e3*(a.step_seconds-b.step_seconds)/(a.steps-b.steps):.3f}")
huge = re.search(r"AnonHugePages:\s+(\d+)", open("/proc/self/smaps_rollup").read()).group(1)
print("RESULT", " ".join(out), f"huge_kB={huge}")
llm.shutdown()
