"""Splits the paired rounds of pair.py logs by whether the adaptive engine ran k = 0 on every step of its run, from
the folder of the logs: python3 analyse.py e2.log e3.log e5.log"""
import re, statistics, sys

ROW = re.compile(r"r(\d+) (\w+): tpot=([\d.]+) target=([\d.]+) step=([\d.]+).* k=(\[.*\])")


def rounds(log):
    rows = {}
    for line in open(log):
        m = ROW.match(line)
        if m:
            rows.setdefault(m[2], {})[int(m[1])] = (float(m[3]), m[6])
    return rows


for log in sys.argv[1:]:
    rows = rounds(log)
    print(f"{log}: k = 0's TPOT / the other engine's, paired by round (round 0, the warm-up, left out)")
    for name in rows:
        if name == "k0":
            continue
        always_k0 = [i for i in rows[name] if i > 0 and rows[name][i][1] in ("[127, 0, 0, 0]", "[]")]
        drafted = [i for i in rows[name] if i > 0 and i not in always_k0]
        for label, idx in ((f"{name}, k = 0 on every step", always_k0), (f"{name}, some steps drafted", drafted)):
            if not idx:
                continue
            r = [rows["k0"][i][0] / rows[name][i][0] for i in idx]
            print(f"  {label}: {len(r)} rounds, median {statistics.median(r):.3f}, mean {statistics.mean(r):.3f}"
                  f" (rounds {', '.join(str(i) for i in idx)})")
