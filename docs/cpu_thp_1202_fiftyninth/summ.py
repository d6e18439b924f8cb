"""Each process's mean target forward time (ms a step) with and without huge pages, from run.sh's runs: fixed
k = 0's engine per process, the pairs' ratios, and how far the two engines of one process read apart."""
import glob
import json
import re
import statistics as st

per = {0: {}, 1: {}}
engines_apart = []
for f in glob.glob("docs/cpu_thp_1202_fiftyninth/runs/runs_*_*.jsonl"):
    e, i = map(int, re.findall(r"runs_(\d)_(\d+)", f)[0])
    rows = [json.loads(line) for line in open(f)]
    fixed = st.mean([r["target_ms_per_step"] for r in rows if r["policy"] == "fixed"])
    other = st.mean([r["target_ms_per_step"] for r in rows if r["policy"] != "fixed"])
    per[e][i] = fixed
    engines_apart.append(abs(other / fixed - 1))
for e in (0, 1):
    ms = [per[e][i] for i in sorted(per[e])]
    print(f"THP_MEM_ALLOC_ENABLE={e}: " + " ".join(f"{m:.2f}" for m in ms))
    print(f"  mean {st.mean(ms):.3f} ms, range {min(ms):.2f}-{max(ms):.2f} ({100 * (max(ms) - min(ms)) / min(ms):.1f}%)")
pairs = [per[1][i] / per[0][i] for i in sorted(per[0])]
print("pairs, with / without: " + " ".join(f"{p:.3f}" for p in pairs) + f"; median {st.median(pairs):.3f}")
print(f"the two engines of a process: at most {100 * max(engines_apart):.1f}% apart")
