"""This session's A/B calls (calls/call*/bench_<version>_<round>.txt, the tables of bench_mla_attention.py), per
version: the fused call's µs in both rounds, the ratio of their sums to the first version's, and the % of copy
bandwidth and fused-vs-separate speedup of each round.
  python3 analyse.py > ab_table.txt"""
import collections
import pathlib
import re

HERE = pathlib.Path(__file__).parent / "calls"
ROW = re.compile(r"\| 8192 \| (\d+) \| (\d) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \| [^|]+ \| \d+ \| (\d+)% \|")


def read(path):
    """{(B, k): (fused us, separate us, speedup, % of copy bandwidth)}"""
    cells = {}
    for line in path.read_text().splitlines():
        if m := ROW.match(line):
            b, k, fused, separate, speedup, pct = m.groups()
            cells[(int(b), int(k))] = (float(fused), float(separate), float(speedup), int(pct))
    return cells


for call in sorted(p for p in HERE.iterdir() if list(p.glob("bench_*_1.txt"))):
    runs = collections.defaultdict(list)
    for path in sorted(call.glob("bench_*_[12].txt")):
        runs[path.stem[len("bench_"):-2]].append(read(path))
    order = ["A"] + sorted(v for v in runs if v != "A")
    print(f"{call.name} (A = the tree of that call)")
    print("| B | k | " + " | ".join(f"{v} µs" for v in order) + " | " + " | ".join(f"{v} / A" for v in order[1:])
          + " | " + " | ".join(f"{v} % BW; speedup" for v in order) + " |")
    print("|---" * (2 + 3 * len(order) - 1) + "|")
    for cell in runs["A"][0]:
        times = {v: [r[cell][0] for r in runs[v]] for v in order}
        print(f"| {cell[0]} | {cell[1]} | " + " | ".join(" / ".join(f"{t:.1f}" for t in times[v]) for v in order)
              + " | " + " | ".join(f"{sum(times[v]) / sum(times['A']):.3f}" for v in order[1:]) + " | "
              + " | ".join(" / ".join(f"{r[cell][3]}%; {r[cell][2]:.2f}x" for r in runs[v]) for v in order) + " |")
    print()
