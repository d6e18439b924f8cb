"""One engine of bench_offline.py's greedy cell at batch 64 (the embedded model, float32, this CPU), run ROUNDS
times after its warm-up, for a probe build (docs/cpu_host_1201_fortyfirst/step_laps.diff prints each part's mean
host time over the decode steps at k = 0 with at least 60 sequences when the process exits), from the repository
root:  .venv/bin/python docs/cpu_host_1201_fortysecond/b64_engine.py k0|adaptive ROUNDS"""
import sys

from mtpserve import LLM

sys.path.insert(0, "scripts")
from bench_offline import PROMPTS, run  # noqa: E402

name, rounds = sys.argv[1], int(sys.argv[2])
k = 0 if name == "k0" else 3
llm = LLM(None, devices="cpu", dtype="float32", num_speculative_tokens=k,
          speculative_policy="adaptive" if k else "fixed", max_cache_blocks=512)
for r in range(rounds):
    result = run(llm, 64, 128, 0.0)
    print(f"{name} round {r}: TPOT {result['tpot_ms']:.3f} ms, step {result['step_ms_per_step']:.3f}, target "
          f"{result['target_ms_per_step']:.3f}, steps by k {result['steps_by_k']}", flush=True)
llm.shutdown()
