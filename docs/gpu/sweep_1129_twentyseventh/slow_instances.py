"""Where a slow server instance loses its time: for every MTP cell of the serving sweeps in the given tarballs
(bench_mtp_sweep.py --isolated, 3 repeats, each a server instance of its own), the fastest and the slowest repeat
by mean TPOT, with the engine's ms per step of each (whole step, target forward, drafting, and the drafting's host
work before its launch), and how often the slowest repeat is also the one whose drafting's host work took longest.

    python3 docs/gpu/sweep_1129_twentyseventh/slow_instances.py docs/gpu/sweep_1129_twentyseventh/greedy_*.tgz \
        docs/gpu/seq_aging_1129/greedy.tgz
"""
import json
import sys
import tarfile


def cells(path):
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            if member.name.endswith("sweep.json"):
                for row in json.load(tar.extractfile(member))["rows"]:
                    if row["method"] != "baseline" and len(row["repeats_mean_tpot_ms"]) == 3:
                        yield row


def main(paths):
    same = total = 0
    print("| tarball | method | c | TPOT fastest -> slowest (ms) | step | target | draft | draft host |")
    print("|---|---|---:|---|---|---|---|---|")
    for path in paths:
        for row in cells(path):
            tpot, split = row["repeats_mean_tpot_ms"], row["repeats_step_ms"]
            fast, slow = tpot.index(min(tpot)), tpot.index(max(tpot))
            host = max(range(3), key=lambda i: split[i][3])
            total += 1
            same += slow == host
            print(f"| {path.split('/')[-1]} | {row['method']} | {row['concurrency']} | {tpot[fast]:.3f} -> {tpot[slow]:.3f} "
                  f"({tpot[slow] / tpot[fast] - 1:+.1%}) | " +
                  " | ".join(f"{split[fast][q]:.3f} -> {split[slow][q]:.3f}" for q in range(4)) + " |")
    print(f"\nThe slowest repeat is also the one with the longest drafting host work in {same} of {total} cells "
          "(1 in 3 by chance).")


if __name__ == "__main__":
    main(sys.argv[1:])
