"""Paged MLA attention on the GPU (issue 11): the fused MTP verify kernel against its memory floor.

DeepSeek-V3 at TP8 (16 heads, kv_lora 512 + rope 64 = 576, bf16), context 8192, block size 64, batch
B in {1, 16, 64, 128}, k in {0, 1, 2, 3} drafts. For each (B, k) (and each context of --contexts, whose
times against the context show a call's fixed cost as the intercept):
  fused     one call: B sequences of k + 1 query rows each (the verify step)
  separate  the same rows as B * (k + 1) one-row decode sequences over the same KV (row i of a sequence
            sees c - k + i positions, exactly as in the fused call)
  speedup   separate / fused; target >= 0.9 * (k + 1) for k >= 1
  bandwidth latent-cache bytes the step must read (B * context * 576 * 2) / fused time, as a fraction of
            the device-to-device copy bandwidth (bytes read + written / time of a 1 GiB copy_) measured in
            the same run; target >= 80% for B >= 16
Block tables are shuffled, and several cache sets rotate between calls so that no call finds its KV in L2.
Calls are replayed from a CUDA graph (as the engine runs decode), so host launch overhead is not timed.
Prints a markdown table and writes mla_attention.json into --out (default $OUT or /tmp). --breakdown adds, per
fused call, its kernels' device time (the attention kernel and the split-KV combine), from eager calls under
torch.profiler. --sustain S replays each fused call back to back for S seconds and adds its time there with
the SM clock, power and clock-limit reasons nvidia-smi reports (the H100 reaches its power cap). --flashmla
CHECKOUT builds FlashMLA's dense decode from that source tree (scripts/flashmla_reference.py) and times it on
the same rows, cache and tables as each fused call, in the same graph replay, with the largest difference
between its output and ours.

  python3 scripts/bench_mla_attention.py --out /tmp
"""
import argparse
import datetime
import json
import os

import torch

import flashmla_reference
from gpu_timing import copy_bandwidth, graph_us, profiled_kernels, sustained
from mtpserve import _C

HEADS, LORA, ROPE, BLOCK = 16, 512, 64, 64
DIM = LORA + ROPE
BF16 = 2
ROTATION_BYTES = 256 << 20  # several times the H100/H200 L2 (50/60 MB)


def cycling(calls: list[tuple], fn=_C.mla_attention):
    """(run_all, n): n calls of fn cycling through `calls` (one per KV set)."""
    inner = max(len(calls), 8)

    def run_all():
        for i in range(inner):
            fn(*calls[i % len(calls)])

    return run_all, inner


def attention_us(calls: list[tuple], reps: int, fn=_C.mla_attention) -> float:
    """Per-call time of fn cycling through `calls`, replayed from a CUDA graph as the engine runs decode steps,
    so host launch overhead does not count: a B = 16 call is ~60 us."""
    return graph_us(*cycling(calls, fn), reps)


def flashmla_columns(module, q, pool, tables, k, reps: int, ours: torch.Tensor) -> dict:
    """FlashMLA's time on the fused call's rows, cache and tables, and its largest difference from our output."""
    batch, context = tables[0].size(0), tables[0].size(1) * BLOCK
    call = flashmla_reference.DenseDecode(module, batch, k + 1, context, tables[0], pool, q, DIM**-0.5)
    us = attention_us([(t,) for t in tables], reps, call)
    return dict(flashmla_us=us, flashmla_max_abs_diff=(call.out.float() - ours.float()).abs().max().item())


def kv_sets(batch: int, context: int, gen: torch.Generator):
    """One cache pool holding `sets` independent KV sets of `batch` sequences; returns the pool and, per
    set, its shuffled block tables [batch, context / BLOCK]."""
    per_seq = context // BLOCK
    set_bytes = batch * context * DIM * BF16
    sets = max(1, -(-ROTATION_BYTES // set_bytes))
    pool = torch.randn(sets * batch * per_seq, BLOCK, DIM, device="cuda", dtype=torch.bfloat16, generator=gen)
    order = torch.randperm(sets * batch * per_seq, device="cuda", generator=gen).to(torch.int32)
    return pool, list(order.view(sets, batch, per_seq).unbind(0))


def verify_call(q, pool, tables, k):
    """The fused verify step: every sequence's k + 1 rows in one call."""
    batch, context = tables.size(0), tables.size(1) * BLOCK
    query_start = torch.arange(0, batch + 1, device="cuda", dtype=torch.int32) * (k + 1)
    context_lens = torch.full((batch,), context, device="cuda", dtype=torch.int32)
    return (q, pool, tables, query_start, context_lens, k + 1, context, LORA, DIM**-0.5)


def separate_call(q, pool, tables, k):
    """The same rows as one-row decode sequences: row i of a sequence sees context - k + i positions."""
    batch, context = tables.size(0), tables.size(1) * BLOCK
    rows = batch * (k + 1)
    query_start = torch.arange(0, rows + 1, device="cuda", dtype=torch.int32)
    context_lens = (context - k + torch.arange(k + 1, device="cuda", dtype=torch.int32)).repeat(batch)
    return (q, pool, tables.repeat_interleave(k + 1, dim=0), query_start, context_lens, 1, context, LORA, DIM**-0.5)


def measure_batch(batch: int, context: int, ks: list[int], args, gen, copy_bw: float, flashmla) -> list[dict]:
    """Fused and separate times of every k at one batch and context."""
    pool, tables = kv_sets(batch, context, gen)
    results = []
    for k in ks:
        q = torch.randn(batch * (k + 1), HEADS, DIM, device="cuda", dtype=torch.bfloat16, generator=gen)
        fused_calls = [verify_call(q, pool, t, k) for t in tables]
        fused = attention_us(fused_calls, args.reps)
        separate = attention_us([separate_call(q, pool, t, k) for t in tables], args.reps)
        kv_bytes = batch * context * DIM * BF16
        bandwidth = kv_bytes / (fused * 1e-6)
        results.append(dict(batch=batch, context=context, k=k, fused_us=fused, separate_us=separate,
                            speedup=separate / fused, speedup_target=0.9 * (k + 1) if k else None, kv_bytes=kv_bytes,
                            bandwidth_gbs=bandwidth / 1e9, floor_fraction=bandwidth / copy_bw))
        if flashmla:
            ours = _C.mla_attention(*fused_calls[0])
            results[-1].update(flashmla_columns(flashmla, q, pool, tables, k, args.reps, ours))
            results[-1]["flashmla_floor_fraction"] = kv_bytes / (results[-1]["flashmla_us"] * 1e-6) / copy_bw
        if args.sustain:
            results[-1].update(sustained(*cycling(fused_calls), args.sustain))
            results[-1]["sustained_floor_fraction"] = kv_bytes / (results[-1]["sustained_us"] * 1e-6) / copy_bw
        if args.breakdown:
            call = lambda i: _C.mla_attention(*fused_calls[i % len(fused_calls)])  # noqa: E731
            results[-1]["kernels"] = profiled_kernels(call, args.reps, warmup=2)
    del pool, tables
    torch.cuda.empty_cache()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--batches", default="1,16,64,128")
    parser.add_argument("--ks", default="0,1,2,3")
    parser.add_argument("--contexts", default="8192", help="comma-separated context lengths, multiples of 64")
    parser.add_argument("--breakdown", action="store_true", help="per-kernel device time of each fused call")
    parser.add_argument("--sustain", type=float, default=0.0, metavar="SECONDS",
                        help="also replay each fused call back to back this long: its time, SM clock and power")
    parser.add_argument("--flashmla", metavar="CHECKOUT", help="also time FlashMLA's dense decode, built from here")
    args = parser.parse_args()
    flashmla = flashmla_reference.load(args.flashmla) if args.flashmla else None
    gen = torch.Generator(device="cuda").manual_seed(0)
    copy_bw = copy_bandwidth(args.reps)
    results = []
    for context in [int(c) for c in args.contexts.split(",")]:
        for batch in [int(b) for b in args.batches.split(",")]:
            results += measure_batch(batch, context, [int(x) for x in args.ks.split(",")], args, gen, copy_bw,
                                     flashmla)

    print(f"device: {torch.cuda.get_device_name(0)}, copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + write)")
    print("| context | B | k | fused (us) | separate (us) | fused speedup | target | KV GB/s | % of copy BW |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        target = f">= {r['speedup_target']:.1f}" if r["speedup_target"] else "-"
        print(f"| {r['context']} | {r['batch']} | {r['k']} | {r['fused_us']:.1f} | {r['separate_us']:.1f} | "
              f"{r['speedup']:.2f}x | "
              f"{target} | {r['bandwidth_gbs']:.0f} | {100 * r['floor_fraction']:.0f}% |")
    if flashmla:
        print("FlashMLA's dense decode on the same calls (same graph replay):")
        print("| context | B | k | ours (us) | FlashMLA (us) | ours / FlashMLA | FlashMLA % of copy BW | "
              "max abs diff |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            print(f"| {r['context']} | {r['batch']} | {r['k']} | {r['fused_us']:.1f} | {r['flashmla_us']:.1f} | "
                  f"{r['fused_us'] / r['flashmla_us']:.3f} | {100 * r['flashmla_floor_fraction']:.0f}% | "
                  f"{r['flashmla_max_abs_diff']:.2e} |")
    if args.sustain:
        print(f"sustained replay ({args.sustain:.0f} s each), with nvidia-smi's medians:")
        print("| context | B | k | fused (us) | % of copy BW | SM clock (MHz) | power (W) | clock limits |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            print(f"| {r['context']} | {r['batch']} | {r['k']} | {r['sustained_us']:.1f} | "
                  f"{100 * r['sustained_floor_fraction']:.0f}% | {r['sm_clock_mhz']:.0f} | {r['power_w']:.0f} | "
                  f"{' '.join(r['clock_limits'])} |")
    for r in (r for r in results if "kernels" in r):
        kernels = ", ".join(f"{name.split('(')[0]} {us:.1f} us ({share:.0f}%)" for name, us, share in r["kernels"])
        print(f"context {r['context']}, B = {r['batch']}, k = {r['k']}, fused, eager: {kernels}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "mla_attention.json")
    with open(path, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(0), date=datetime.datetime.now(datetime.UTC).isoformat(),
                       torch=torch.__version__, heads=HEADS, kv_lora=LORA, rope=ROPE, block_size=BLOCK,
                       dtype="bfloat16", copy_bandwidth_gbs=copy_bw / 1e9, results=results), f,
                  indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
