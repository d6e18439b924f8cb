"""Summarise MTP_TRACE PLAN lines of a batch-4 run: estimated step ms and TPOT per uniform k, and the chosen k."""
import re, sys, statistics, collections
est = collections.defaultdict(list); tp = collections.defaultdict(list); chosen = collections.Counter(); n4 = 0
reach = []
for line in open(sys.argv[1]):
    m = re.match(r"PLAN n=(\d+) est=(\d+) probe=(\d) final=(\d+) tpot_ms=([\d./]+) step_ms=([\d./]+) reach=([\d./]+) eng=([\d./]+)", line)
    if not m or int(m.group(1)) != int(sys.argv[2]): continue
    n4 += 1
    chosen[(int(m.group(2)), int(m.group(4)), int(m.group(3)))] += 1
    for k, v in enumerate(m.group(6).split("/")): est[k].append(float(v))
    for k, v in enumerate(m.group(5).split("/")): tp[k].append(float(v))
    reach.append([float(x) for x in m.group(7).split("/")])
print("plans at n =", sys.argv[2], n4)
print("estimated step ms per uniform k (median):", [round(statistics.median(est[k]), 2) for k in sorted(est)])
print("estimated tpot ms per uniform k (median):", [round(statistics.median(tp[k]), 3) for k in sorted(tp)])
print("mean reach of drafts 1..3:", [round(statistics.mean(r[i] for r in reach), 3) for i in range(3)])
print("(estimated k, final k, probe): count", sorted(chosen.items(), key=lambda x: -x[1])[:8])
