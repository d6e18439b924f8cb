"""Engines built one after another in one process, timed in turn on bench_offline.py's greedy cell (the embedded
model, float32, this CPU), the order reversed every other round, from the repository root:
  .venv/bin/python docs/cpu_host_1201_fortythird/engines_in_one_process.py k0,adaptive ROUNDS [BATCH]
The first argument names the engines in the order they are built: k0 (k = 0) or adaptive (k_max 3)."""
import resource, statistics, sys
from mtpserve import LLM
sys.path.insert(0, "scripts")
from bench_offline import run

spec = sys.argv[1].split(",")  # e.g. k0,k0 or adaptive,k0
rounds = int(sys.argv[2])
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 64
llms = []
for name in spec:
    k = 0 if name == "k0" else 3
    llms.append(LLM(None, devices="cpu", dtype="float32", num_speculative_tokens=k,
                    speculative_policy="adaptive" if k else "fixed", max_cache_blocks=512))
tpots = [[] for _ in spec]
for r in range(rounds):
    order = list(range(len(spec))) if r % 2 == 0 else list(reversed(range(len(spec))))
    for i in order:
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        res = run(llms[i], batch, 128, 0.0)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        tpots[i].append(res["tpot_ms"])
        print(f"round {r} engine {i} ({spec[i]}): TPOT {res['tpot_ms']:.3f} target {res['target_ms_per_step']:.3f} "
              f"k {res['steps_by_k']} minflt {faults}", flush=True)
for i, name in enumerate(spec):
    print(f"engine {i} {name}: median TPOT {statistics.median(tpots[i]):.3f}  all {[round(t,2) for t in tpots[i]]}")
print("ratio engine0/engine1 median:", statistics.median(tpots[0]) / statistics.median(tpots[1]),
      "paired:", statistics.median(a / b for a, b in zip(tpots[0], tpots[1])))
for l in llms:
    l.shutdown()
