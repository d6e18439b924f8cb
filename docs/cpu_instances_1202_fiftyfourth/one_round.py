import sys, time, random
from mtpserve import LLM, SamplingParams
k = int(sys.argv[1])
llm = LLM(None, num_speculative_tokens=k)
rng = random.Random(7)
prompts = [[rng.randrange(5, 1000) for _ in range(32)] for _ in range(8)]
ps = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=20, ignore_eos=True))
b = llm.stats(); t = time.perf_counter()
llm.generate(prompts, ps)
a = llm.stats(); w = time.perf_counter() - t
print(f"RESULT steps={a.steps-b.steps} step_ms={1e3*(a.step_seconds-b.step_seconds)/(a.steps-b.steps):.3f} "
      f"target_ms={1e3*(a.target_seconds-b.target_seconds)/(a.steps-b.steps):.3f} wall={w:.3f}")
llm.shutdown()
