"""Phases of the in-kernel combine (scratch; ran on an instrumented build of its second version, not kept): per
block, globaltimer at entry (t0), loop end (t4), partial stored (t5), all splits arrived (t6), weights ready (t7), combine done (t8). Calls
replayed from a CUDA graph; cooperative launch on, then off (MLA_NO_COOP)."""
import os

import torch

from timeline import BUF, fused_run, graph_us, kv_sets, med, recorded_replay


def calls_of(rows, per_call):
    rows = sorted(rows, key=lambda r: r[2])
    return [rows[i:i + per_call] for i in range(0, len(rows) - per_call + 1, per_call)]


def main():
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in (1, 16, 64):
        pool, tables = kv_sets(batch, 8192, gen)
        for k in (0, 3):
            run_all, n = fused_run(batch, k, gen, pool, tables)
            for coop in (True, False):
                if coop:
                    os.environ.pop("MLA_NO_COOP", None)
                else:
                    os.environ["MLA_NO_COOP"] = "1"
                graph = recorded_replay(run_all)
                cnt = int(BUF[0].item())
                rows = [r for r in BUF[16:16 + cnt * 12].view(-1, 12).cpu().tolist() if r[0] == 3]
                per_call = cnt // n
                groups = calls_of(rows, per_call)
                ph = {name: [] for name in ("loop", "store", "wait", "weights", "combine", "span", "period")}
                for i, g in enumerate(groups):
                    start = min(r[2] for r in g)
                    real = [r for r in g if r[3] > r[2]]
                    ph["loop"].append(med([(r[3] - r[2]) / 1e3 for r in real]))
                    ph["store"].append(med([(r[4] - r[3]) / 1e3 for r in real]))
                    ph["wait"].append(med([(r[5] - r[4]) / 1e3 for r in g]))
                    ph["weights"].append(med([(r[6] - r[5]) / 1e3 for r in g]))
                    ph["combine"].append(med([(r[7] - r[6]) / 1e3 for r in g]))
                    ph["span"].append((max(r[7] for r in g) - start) / 1e3)
                    if i + 1 < len(groups):
                        ph["period"].append((min(r[2] for r in groups[i + 1]) - start) / 1e3)
                us = graph_us(run_all, n, 20)
                print(f"B={batch} k={k} coop={coop} graph {us:.1f} us, blocks/call {per_call}: " +
                      ", ".join(f"{key} {med(v):.2f}" for key, v in ph.items()), flush=True)
                del graph
        del pool, tables
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
