"""Per-block timeline of the fused MLA verify call (scratch; needs a build with timeline_instrumentation.patch).

Each attention block records globaltimer at: entry (t0), barriers set (t1), Q landed (t2), its first KV tile
landed (t3), loop end of warpgroup 0 (t4) and 1 (t4b), partial/output stored (t5), plus its SM and clock64
cycles; each combine block its start and end. Calls are replayed from a CUDA graph, as the benchmark does.
"""
import json
import os
import statistics
import sys

import torch

BUF = torch.zeros(16 + 65536 * 12, dtype=torch.int64, device="cuda")
os.environ["MLA_TL_PTR"] = str(BUF.data_ptr())
sys.path.insert(0, "scripts")
from bench_mla_attention import HEADS, DIM, kv_sets, verify_call, cycling  # noqa: E402
from gpu_timing import captured, graph_us  # noqa: E402


def records():
    n = int(BUF[0].item())
    rows = BUF[16:16 + min(n, 65536) * 12].view(-1, 12).cpu().tolist()
    return rows


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def analyse(rows):
    att = sorted((r for r in rows if r[0] == 1), key=lambda r: r[2])
    com = sorted((r for r in rows if r[0] == 2), key=lambda r: r[2])
    events = [("a", r[2], r) for r in att] + [("c", r[2], r) for r in com]
    events.sort(key=lambda e: e[1])
    kernels = []
    for kind, _, r in events:
        if kernels and kernels[-1][0] == kind:
            kernels[-1][1].append(r)
        else:
            kernels.append((kind, [r]))
    calls = []
    for i, (kind, rs) in enumerate(kernels):
        if kind != "a":
            continue
        t0 = [r[2] for r in rs]
        start, end = min(t0), max(r[8] for r in rs)
        c = dict(blocks=len(rs), span_us=(end - start) / 1e3,
                 launch_spread_us=(max(t0) - start) / 1e3,
                 barrier_us=med([(r[3] - r[2]) / 1e3 for r in rs]),
                 q_landed_us=med([(r[4] - r[2]) / 1e3 for r in rs]),
                 first_tile_us=med([(r[5] - r[2]) / 1e3 for r in rs]),
                 first_tile_max_us=max((r[5] - r[2]) / 1e3 for r in rs),
                 loop_med_us=med([(r[6] - r[4]) / 1e3 for r in rs]),
                 loop_min_us=min((r[6] - r[4]) / 1e3 for r in rs),
                 loop_max_us=max((r[6] - r[4]) / 1e3 for r in rs),
                 wg_skew_us=med([(r[7] - r[6]) / 1e3 for r in rs]),
                 epilogue_med_us=med([(r[8] - max(r[6], r[7])) / 1e3 for r in rs]),
                 epilogue_max_us=max((r[8] - max(r[6], r[7])) / 1e3 for r in rs),
                 end_spread_us=(end - med([r[8] for r in rs])) / 1e3,
                 block_med_us=med([(r[8] - r[2]) / 1e3 for r in rs]),
                 clock_mhz=med([r[9] / (r[8] - r[2]) * 1e3 for r in rs if r[8] > r[2]]))
        slow = sorted(rs, key=lambda r: r[6] - r[4])[-4:]
        c["slowest_loops"] = [dict(sm=r[1] >> 48, seq=r[1] & 0xFFFF, split=(r[1] >> 32) & 0xFFFF,
                                   loop_us=(r[6] - r[4]) / 1e3, start_us=(r[2] - start) / 1e3) for r in slow]
        if i + 1 < len(kernels) and kernels[i + 1][0] == "c":
            cs = kernels[i + 1][1]
            cstart, cend = min(r[2] for r in cs), max(r[3] for r in cs)
            c.update(combine_blocks=len(cs), gap_to_combine_us=(cstart - end) / 1e3,
                     combine_span_us=(cend - cstart) / 1e3)
            end = cend
        nxt = next((k for k in kernels[i + 1:] if k[0] == "a"), None)
        if nxt:
            c["gap_to_next_call_us"] = (min(r[2] for r in nxt[1]) - end) / 1e3
            c["period_us"] = (min(r[2] for r in nxt[1]) - start) / 1e3
        calls.append(c)
    return calls


def fused_run(batch, k, gen, pool, tables):
    """run_all() and its call count: the fused verify call of (batch, k), cycling over the KV sets."""
    q = torch.randn(batch * (k + 1), HEADS, DIM, device="cuda", dtype=torch.bfloat16, generator=gen)
    return cycling([verify_call(q, pool, t, k) for t in tables])


def recorded_replay(run_all):
    """run_all captured in a graph, replayed once to warm up and once more with the records cleared."""
    graph = captured(run_all)
    graph.replay()
    torch.cuda.synchronize()
    BUF.zero_()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def main():
    out = os.environ.get("OUT", "/tmp")
    gen = torch.Generator(device="cuda").manual_seed(0)
    results = []
    for batch in (16, 64, 128):
        pool, tables = kv_sets(batch, 8192, gen)
        for k in (0, 3):
            run_all, n = fused_run(batch, k, gen, pool, tables)
            graph = recorded_replay(run_all)
            per_call = analyse(records())
            us = graph_us(run_all, n, 20)
            keys = [k2 for k2 in per_call[0] if k2 != "slowest_loops"]
            summary = {key: med([c[key] for c in per_call if key in c]) for key in keys}
            results.append(dict(batch=batch, k=k, graph_us=us, summary=summary, calls=per_call))
            print(f"B={batch} k={k} graph {us:.1f} us | " + ", ".join(f"{key} {v:.2f}" for key, v in summary.items()))
            print("   slowest loops (one call):", per_call[len(per_call) // 2]["slowest_loops"])
            del graph
        del pool, tables
        torch.cuda.empty_cache()
    with open(os.path.join(out, "timeline.json"), "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(0), results=results), f, indent=1)


if __name__ == "__main__":
    main()
