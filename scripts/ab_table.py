"""The attention A/B of scripts/gpu_ab.sh as one table: reads the runs.tgz it leaves, each run folder (A1, B1, ...)
holding the mla_attention.json that `bench_mla_attention.py --out $RUN_OUT` wrote, and prints per (context, B, k)
each version's fused µs in every round, the ratio of each version's summed time to A's (above 1: slower than A),
and each version's % of copy bandwidth and fused-vs-separate speedup.
  python3 scripts/ab_table.py runs.tgz > ab_table.txt"""
import argparse
import collections
import json
import re
import tarfile

RUN = re.compile(r"^([A-H])(\d+)/mla_attention\.json$")


def read_runs(path: str) -> dict:
    """{version: [{(context, B, k): result row} per round, in round order]}"""
    rounds = collections.defaultdict(dict)
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            if m := RUN.match(member.name):
                rows = json.load(archive.extractfile(member))["results"]
                rounds[m.group(1)][int(m.group(2))] = {(r["context"], r["batch"], r["k"]): r for r in rows}
    if "A" not in rounds:
        raise SystemExit(f"{path}: no A runs with an mla_attention.json (is it gpu_ab.sh's runs.tgz?)")
    return {v: [by_round[i] for i in sorted(by_round)] for v, by_round in sorted(rounds.items())}


def table(runs: dict) -> list[str]:
    versions = list(runs)
    others = versions[1:]
    lines = ["| context | B | k | " + " | ".join(f"{v} µs" for v in versions) + " | "
             + " | ".join(f"{v} / A" for v in others) + " | " + " | ".join(f"{v}: % BW; speedup" for v in versions)
             + " |", "|---" * (3 + 2 * len(versions) + len(others)) + "|"]
    for cell in runs["A"][0]:
        times = {v: [r[cell]["fused_us"] for r in runs[v]] for v in versions}
        lines.append(
            f"| {cell[0]} | {cell[1]} | {cell[2]} | "
            + " | ".join(" / ".join(f"{t:.1f}" for t in times[v]) for v in versions) + " | "
            + " | ".join(f"{sum(times[v]) / sum(times['A']):.3f}" for v in others) + " | "
            + " | ".join(" / ".join(f"{100 * r[cell]['floor_fraction']:.0f}%; {r[cell]['speedup']:.2f}x"
                                    for r in runs[v]) for v in versions) + " |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", help="the runs.tgz that scripts/gpu_ab.sh left in $OUT")
    print("\n".join(table(read_runs(parser.parse_args().runs))))


if __name__ == "__main__":
    main()
