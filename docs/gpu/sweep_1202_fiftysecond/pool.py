"""The temperature-1.5 instances of calls 1, 2 and 4 side by side (docs/benchmarks.md, fifty-second session): per c, each
call's adaptive / k = 0 TPOT by the median repeats, then over every instance of the three calls pooled: k = 0's median
engine step over adaptive's, and each engine's median host time outside the target forward (step - target), in us.
    python3 docs/gpu/sweep_1202_fiftysecond/pool.py"""
import json
import os
import statistics as st
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = {"call1": "t15_c1_80", "call2": "t15_open", "call4": "t15_c8_80"}


def rows(call: str, name: str) -> list[dict]:
    with tarfile.open(os.path.join(HERE, "calls", call, f"{name}.tgz")) as tgz:
        return json.load(tgz.extractfile(f"{name}/sweep.json"))["rows"]


cells: dict[int, dict[str, dict]] = {}
for call, name in RUNS.items():
    for r in rows(call, name):
        method = "k0" if r["method"] == "baseline" else "adaptive"
        cells.setdefault(r["concurrency"], {}).setdefault(call, {})[method] = r
for c, calls in sorted(cells.items()):
    steps, host = {"k0": [], "adaptive": []}, {"k0": [], "adaptive": []}
    line = [f"c = {c}:"]
    for call, by_method in sorted(calls.items()):
        tpot = {m: st.median(r["repeats_mean_tpot_ms"]) for m, r in by_method.items()}
        line.append(f"{call} {tpot['k0'] / tpot['adaptive']:.3f}")
        for m, r in by_method.items():
            steps[m] += [s[0] for s in r["repeats_step_ms"]]
            host[m] += [1000 * (s[0] - s[1]) for s in r["repeats_step_ms"]]
    line.append(f"| pooled step k0/adaptive {st.median(steps['k0']) / st.median(steps['adaptive']):.3f}, "
                f"host us {st.median(host['k0']):.0f} / {st.median(host['adaptive']):.0f}")
    print(" ".join(line))
