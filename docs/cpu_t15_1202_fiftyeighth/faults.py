"""An engine on this CPU at temperature 1.5 (k and policy from the arguments): per step, its time, its target forward
and the minor page faults of the process (all threads), over 4 rounds of a batch. python3 faults.py K BATCH [fixed|adaptive]"""
import resource, time, sys, os
from mtpserve import LLM, SamplingParams
k = int(sys.argv[1]); batch = int(sys.argv[2]); policy = sys.argv[3] if len(sys.argv) > 3 else "fixed"
llm = LLM(None, devices="cpu", dtype="float32", num_speculative_tokens=k, speculative_policy=policy, max_cache_blocks=512)
params = SamplingParams(temperature=1.5, max_tokens=128, ignore_eos=True)
msgs = [[{"role": "user", "content": f"Tell me about topic number {i}."}] for i in range(batch)]
llm.chat(msgs, params)
for r in range(4):
    s0 = llm.stats(); f0 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter()
    llm.chat(msgs, params)
    el = time.perf_counter() - t; f1 = resource.getrusage(resource.RUSAGE_SELF); s1 = llm.stats()
    steps = s1.steps - s0.steps
    print(f"k={k} {policy} b={batch} steps={steps} ms/step={(s1.step_seconds-s0.step_seconds)/steps*1e3:.2f} target={(s1.target_seconds-s0.target_seconds)/steps*1e3:.2f} minflt/step={(f1.ru_minflt-f0.ru_minflt)/steps:.0f} majflt={f1.ru_majflt-f0.ru_majflt}", flush=True)
llm.shutdown()
