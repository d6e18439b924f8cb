"""Does a sweep cell's slowest round carry its most stolen CPU time? For every cell (method and concurrency) with at
least 3 rounds: which round had the highest TPOT, which the highest stolen share (sweep.json's per-repeat `threads`),
and whether they are the same round. Chance makes them the same in 1 of n rounds' cells.

  python3 docs/gpu/sweep_1202_fiftysixth/steal.py docs/gpu/sweep_1202_fiftysixth/calls/call*/greedy_*.tgz
  python3 docs/gpu/sweep_1202_fiftysixth/steal.py docs/cpu_sweep_1202_fiftysixth/greedy_c*/sweep.json
"""
import json
import sys
import tarfile
from pathlib import Path


def sweep_rows(path):
    if path.endswith(".json"):
        return json.loads(Path(path).read_text())["rows"]
    with tarfile.open(path) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("sweep.json"))
        return json.load(archive.extractfile(member))["rows"]


def main(paths):
    same = expected = cells = 0
    for path in paths:
        for row in sweep_rows(path):
            tpot = row["repeats_mean_tpot_ms"]
            stolen = [t.get("stolen") for t in row["repeats_threads"]]  # a share: 0.01 is 1%
            if len(tpot) < 3 or None in stolen:
                continue
            slowest = max(range(len(tpot)), key=tpot.__getitem__)
            most = max(range(len(stolen)), key=stolen.__getitem__)
            cells += 1
            same += slowest == most
            expected += 1 / len(tpot)
            mark = "  <- same round" if slowest == most else ""
            print(f"{row['method']:22} c={row['concurrency']:<3} TPOT {' / '.join(f'{t:.3f}' for t in tpot)} ms, "
                  f"stolen {' / '.join(f'{100 * s:.2f}' for s in stolen)}%{mark}")
    print(f"slowest round = most stolen in {same} of {cells} cells (chance: {expected:.1f})")


if __name__ == "__main__":
    main(sys.argv[1:])
