"""Decode-only engine ms per emitted token, per concurrency and method, from a full sweep's step traces
(step_trace.patch; the servers' pids in the order k = 0, 1, 2, 3, adaptive). A server's lines are cut into
concurrencies where a step first holds more sequences than the current one allows (the sweep runs them in rising
order), so each cell holds all its repeats; the cut is approximate at a cell's edges.

  python3 step_trace_by_concurrency.py TRACE_PREFIX
"""
import sys, glob, collections
CS = [1, 2, 4, 8, 16, 32, 64, 80]
names = ["k=0", "k=1", "k=2", "k=3", "adaptive"]
table = collections.defaultdict(dict)
for name, path in zip(names, sorted(glob.glob(sys.argv[1] + "*"), key=lambda p: int(p.rsplit(".", 1)[1]))):
    ci, seg = 0, collections.defaultdict(list)
    for l in open(path):
        s = tuple(float(x) for x in l.split())
        while ci + 1 < len(CS) and s[1] > CS[ci]: ci += 1
        seg[CS[ci]].append(s)
    for c in CS:
        g = [s for s in seg[c] if s[0] == 1]
        table[c][name] = 1e3 * sum(s[7] for s in g) / sum(s[5] for s in g)
print("| c | " + " | ".join(names) + " | adaptive / best fixed MTP k |")
print("|---|" + "---:|" * (len(names) + 1))
for c in CS:
    r = table[c]; best = min(r[n] for n in names[1:4])
    print(f"| {c} | " + " | ".join(f"{r[n]:.2f}" for n in names) + f" | {best / r['adaptive']:.2f} |")
