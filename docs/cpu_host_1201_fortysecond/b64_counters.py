"""bench_offline.py's greedy batch-64 cell on one adaptive engine (the embedded model, float32, this CPU), ROUNDS
times after its warm-up: per round its TPOT, steps by k, positions caught up and dropped, seconds of drafting, of
steps and of target forwards, and sequences retired. From the repository root:
    .venv/bin/python docs/cpu_host_1201_fortysecond/b64_counters.py ROUNDS"""
import sys

from mtpserve import LLM

sys.path.insert(0, "scripts")
from bench_offline import run  # noqa: E402

llm = LLM(None, devices="cpu", dtype="float32", num_speculative_tokens=3, speculative_policy="adaptive",
          max_cache_blocks=512)
for r in range(int(sys.argv[1])):
    s0 = llm.stats()
    result = run(llm, 64, 128, 0.0)
    s1 = llm.stats()
    d = lambda name: getattr(s1, name) - getattr(s0, name)  # noqa: E731
    print(f"{r} TPOT {result['tpot_ms']:.2f} by k {result['steps_by_k']} caught up {d('caught_up_positions')} "
          f"dropped {d('dropped_positions')} draft s {d('draft_seconds'):.3f} step s {d('step_seconds'):.3f} "
          f"target s {d('target_seconds'):.3f} retired {s1.spec.retired - s0.spec.retired}", flush=True)
llm.shutdown()
