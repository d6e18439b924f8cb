"""Fused-call times of this session's A/B calls (calls/call*_ab.txt: ab.sh's "== variant round" tables), per
variant: both rounds, and the ratio of their sums to the tree's (A).
  python3 analyse.py > ab_table.txt"""
import collections
import pathlib
import re

HERE = pathlib.Path(__file__).parent / "calls"


def sections(path):
    """{variant: [{(B, k): fused us} per round]}"""
    runs, current = collections.defaultdict(list), None
    for line in path.read_text().splitlines():
        if line.startswith("== "):
            current = {}
            runs[line.split()[1]].append(current)
        elif line.startswith("| 8192"):
            b, k, us = re.match(r"\| 8192 \| (\d+) \| (\d) \| ([\d.]+) \|", line).groups()
            current[(int(b), int(k))] = float(us)
    return runs


for path in sorted(HERE.glob("call*_ab.txt")):
    runs = sections(path)
    others = [v for v in runs if v != "A"]
    print(f"{path.stem}")
    print("| B | k | " + " | ".join(f"{v} (us)" for v in runs) + " | " + " | ".join(f"{v} / A" for v in others) + " |")
    print("|---" * (2 + len(runs) + len(others)) + "|")
    for cell in runs["A"][0]:
        times = {v: [r[cell] for r in runs[v]] for v in runs}
        print(f"| {cell[0]} | {cell[1]} | " + " | ".join(" / ".join(f"{t:.1f}" for t in times[v]) for v in runs)
              + " | " + " | ".join(f"{sum(times[v]) / sum(times['A']):.3f}" for v in others) + " |")
    print()
