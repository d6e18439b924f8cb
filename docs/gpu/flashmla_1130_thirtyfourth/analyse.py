"""Fused-call times of the A/B calls in calls/ (bench_mla_attention.py tables), per variant: both rounds and the
ratio of their sums to the call's reference variant.
  python3 analyse.py > ab_table.txt"""
import pathlib
import re

CALLS = {"ab1": ("A", ["evict", "slabs"]), "ab2": ("evict", ["evict_nofence", "slabs_nofence"]),
         "ab3": ("A", ["evict"]), "ab4": ("A", ["tops"])}
HERE = pathlib.Path(__file__).parent / "calls"


def fused(path):
    """{(B, k): fused us} and the copy bandwidth of one run."""
    text = path.read_text()
    rows = re.findall(r"^\| 8192 \| (\d+) \| (\d) \| ([\d.]+) \|", text, re.M)
    return {(int(b), int(k)): float(us) for b, k, us in rows}, re.search(r"copy bandwidth (\d+)", text).group(1)


for call, (ref, variants) in CALLS.items():
    runs = {v: [fused(HERE / f"{call}_{v}_{r}.txt") for r in (1, 2)] for v in [ref] + variants}
    print(f"{call}: copy GB/s " + ", ".join(f"{v} {'/'.join(bw for _, bw in runs[v])}" for v in runs))
    print("| B | k | " + " | ".join(f"{v} (us)" for v in runs) + " | " + " | ".join(f"{v} / {ref}" for v in variants) + " |")
    print("|---" * (2 + len(runs) + len(variants)) + "|")
    for cell in runs[ref][0][0]:
        times = {v: [r[0][cell] for r in runs[v]] for v in runs}
        ratios = [sum(times[v]) / sum(times[ref]) for v in variants]
        print(f"| {cell[0]} | {cell[1]} | " + " | ".join(" / ".join(f"{t:.1f}" for t in times[v]) for v in runs)
              + " | " + " | ".join(f"{x:.3f}" for x in ratios) + " |")
    print()
