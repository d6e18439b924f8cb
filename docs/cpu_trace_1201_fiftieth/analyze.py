"""Reads the server logs that a sweep with trace.patch applied and MTPSERVE_TRACE=1 leaves (runs.sh) and prints, per
server instance (a `$ command` line starts one):
  steps  each step k's decode steps at batch N: their measured verify seconds (median) and what the cost model
         predicted for them just before, and the median MTP draft phase (the fill and k - 1 recursions) before them
  tokens the tokens the policy expected its chosen plan to emit against what the next decode step emitted, per
         batch size (N and the rest) and step k (logs from the second patch on: `TRACE chose` / `TRACE emitted`)
  python3 docs/cpu_trace_1201_fiftieth/analyze.py N LOG...
"""
import collections
import statistics
import sys


def instances(path: str) -> list[list[list[str]]]:
    runs = []
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.startswith("$ "):
            runs.append([])
        elif line.startswith("TRACE ") and runs:
            runs[-1].append(line.split()[1:])
    return runs


def fields(words: list[str]) -> dict:
    return dict(w.split("=", 1) for w in words[1:])


def steps(run: list[list[str]], n: int) -> None:
    verify, draft = collections.defaultdict(list), collections.defaultdict(list)
    for words in run:
        f = fields(words)
        if int(f["n"]) != n:
            continue
        if words[0] == "verify":
            verify[int(f["k"])].append((float(f["sec"]), float(f["pred"])))
        elif words[0] == "draft":
            draft[int(f["rec"])].append(float(f["sec"]))
    for k in sorted(verify):
        measured = statistics.median(s for s, _ in verify[k]) * 1e3
        predicted = statistics.median(p for _, p in verify[k]) * 1e3
        drafts = draft.get(k - 1, []) if k else []
        drafted = f"{statistics.median(drafts) * 1e3:6.2f} ms ({len(drafts)})" if drafts else "-"
        print(f"    k = {k}: {len(verify[k]):4d} steps, verify {measured:6.2f} ms (predicted {predicted:6.2f}),"
              f" draft phase {drafted}")


def tokens(run: list[list[str]], n: int) -> None:
    cells = collections.defaultdict(lambda: [0, 0.0, 0])
    planned = None
    for words in run:
        f = fields(words)
        if words[0] == "chose":
            planned = (int(f["n"]), int(f["k"]), float(f["tok"]))
        elif words[0] == "emitted" and planned:
            if f["decode"] == "1" and int(f["n"]) == planned[0]:
                cell = cells[(str(n) if planned[0] == n else "other", planned[1])]
                cell[0] += 1
                cell[1] += planned[2]
                cell[2] += int(f["tok"])
            planned = None
    for (batch, k), (count, expected, emitted) in sorted(cells.items()):
        print(f"    batch {batch:>5}, k = {k}: {count:4d} steps, expected {expected / count:6.2f} tokens a step, "
              f"emitted {emitted / count:6.2f} ({emitted / expected:.3f})")


def main() -> None:
    n = int(sys.argv[1])
    for path in sys.argv[2:]:
        for i, run in enumerate(instances(path)):
            print(f"{path} instance {i}, batch {n}:")
            steps(run, n)
            tokens(run, n)


if __name__ == "__main__":
    main()
