"""DeepSeek-V3 MoE layer on the GPU (bf16, random weights) against its memory floor.

Times the whole layer as the model runs it — the fp32 router linear, route_noaux_tc, moe_experts
(grouping, gate_up, SiLU, down, combine) and the shared expert (two linears + silu_and_mul) — and,
for comparison, the same layer through the batch-invariant table's moe_experts (one kernel at every size: our
wgmma expert GEMMs on Hopper, the expert GEMVs elsewhere) and torch._grouped_mm alone for gate_up. With
--breakdown, the kernels of both layers and their share of its time at the given token counts
(torch.profiler). The floor is the bytes of the weights the step must read (distinct experts chosen x 3
matrices, the shared expert, the router) over the device-to-device copy bandwidth measured in the same
run. Weight and input sets rotate between repetitions so no repetition finds its bytes in L2. The layer is
timed as the engine runs decode, replayed from a CUDA graph (so host launch gaps between its ~10 kernels do
not count), and also eagerly, one call at a time.
"""
import argparse
import json
import os
import itertools
import statistics

import torch
import torch.nn.functional as F

from gpu_timing import copy_bandwidth, graph_us, median_us, profiled_kernels
from mtpserve import _C

HIDDEN, INTER, EXPERTS, TOP_K, N_GROUP, TOPK_GROUP, SCALE = 7168, 2048, 256, 8, 8, 4, 2.5
BF16 = 2
EXPERT_BYTES = 3 * HIDDEN * INTER * BF16
ROUTER_BYTES = EXPERTS * HIDDEN * 4


def eager_median_us(fn, inputs, reps: int) -> float:
    """Median of `reps` single eager calls of fn, cycling through `inputs`."""
    calls = itertools.cycle(inputs)
    return median_us(lambda: fn(*next(calls)), reps, warmup=5)


def layer_graph_us(fn, inputs, reps: int) -> float:
    """Per-call time of fn over every input in turn, replayed from one CUDA graph."""
    def run_all():
        for args in inputs:
            fn(*args)

    return graph_us(run_all, len(inputs), reps)


def weight_set(seed: int, router_bias: float) -> dict:
    torch.manual_seed(seed)
    return {
        "gate": torch.randn(EXPERTS, HIDDEN, device="cuda") / HIDDEN**0.5,
        "bias": router_bias * torch.randn(EXPERTS, device="cuda"),
        "gate_up": torch.randn(EXPERTS, 2 * INTER, HIDDEN, device="cuda", dtype=torch.bfloat16).div_(HIDDEN**0.5),
        "down": torch.randn(EXPERTS, HIDDEN, INTER, device="cuda", dtype=torch.bfloat16).div_(INTER**0.5),
        "shared_gate_up": torch.randn(2 * INTER, HIDDEN, device="cuda", dtype=torch.bfloat16) / HIDDEN**0.5,
        "shared_down": torch.randn(HIDDEN, INTER, device="cuda", dtype=torch.bfloat16) / INTER**0.5,
    }


def route(x: torch.Tensor, w: dict):
    logits = F.linear(x.float(), w["gate"])
    return _C.route_noaux_tc(logits, w["bias"], N_GROUP, TOPK_GROUP, TOP_K, True, SCALE)


def moe_layer(x: torch.Tensor, w: dict, experts_fn=_C.moe_experts) -> torch.Tensor:
    weights, experts = route(x, w)
    routed = experts_fn(x, w["gate_up"], w["down"], weights, experts)
    shared = F.linear(_C.silu_and_mul(F.linear(x, w["shared_gate_up"])), w["shared_down"])
    return routed + shared


def invariant_moe_layer(x: torch.Tensor, w: dict) -> torch.Tensor:
    return moe_layer(x, w, _C.batch_invariant.moe_experts)


def breakdown(layer, inputs, reps: int) -> list:
    """(kernel, mean us per layer call, % of the layer's kernel time) for the layer's kernels."""
    return profiled_kernels(lambda i: layer(*inputs[i % len(inputs)]), reps, warmup=min(3, len(inputs)))


def grouped_gate_up_inputs(x: torch.Tensor, w: dict):
    """x rows grouped by expert and the int32 offsets, as moe_experts builds them (outside the timing)."""
    _, experts = route(x, w)
    flat = experts.flatten()
    order = flat.argsort(stable=True)
    offs = torch.bincount(flat, minlength=EXPERTS).cumsum(0).to(torch.int32)
    return x[order // TOP_K].contiguous(), w["gate_up"].transpose(1, 2), offs


def distinct_experts(x: torch.Tensor, w: dict) -> int:
    return int(route(x, w)[1].unique().numel())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--weight-sets", type=int, default=2, help="expert weight sets to rotate (22.5 GB each)")
    parser.add_argument("--input-sets", type=int, default=8)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--router-bias", type=float, default=0.1,
                        help="scale of the random correction bias: 0.1 skews the routing (about 128 distinct experts at "
                             "64 tokens), 0 leaves the random router's own spread (uniform routing would give 223)")
    parser.add_argument("--breakdown", type=int, nargs="*", default=[], help="token counts to profile")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    args = parser.parse_args()

    bandwidth = copy_bandwidth(args.reps)
    per_set = EXPERTS * EXPERT_BYTES + EXPERT_BYTES + ROUTER_BYTES
    free, _ = torch.cuda.mem_get_info()
    sets = max(1, min(args.weight_sets, int(0.8 * free // per_set)))
    weights = [weight_set(seed, args.router_bias) for seed in range(sets)]

    rows = []
    for tokens in args.tokens:
        gen = torch.Generator(device="cuda").manual_seed(tokens)
        inputs = [(torch.randn(tokens, HIDDEN, device="cuda", generator=gen).bfloat16(), weights[i % sets])
                  for i in range(max(args.input_sets, sets))]
        with torch.inference_mode():
            layer_us = layer_graph_us(moe_layer, inputs, args.reps)
            eager_us = eager_median_us(moe_layer, inputs, args.reps)
            invariant_us = layer_graph_us(invariant_moe_layer, inputs, args.reps)
            profiled = tokens in args.breakdown
            kernels = breakdown(moe_layer, inputs, args.reps) if profiled else []
            invariant_kernels = breakdown(invariant_moe_layer, inputs, args.reps) if profiled else []
            gate_up_us = eager_median_us(torch._grouped_mm, [grouped_gate_up_inputs(x, w) for x, w in inputs],
                                         args.reps)
            distinct = statistics.mean(distinct_experts(x, w) for x, w in inputs)
        layer_bytes = distinct * EXPERT_BYTES + EXPERT_BYTES + ROUTER_BYTES
        gate_up_bytes = distinct * EXPERT_BYTES * 2 / 3
        floor_us = layer_bytes / bandwidth * 1e6
        gate_up_floor_us = gate_up_bytes / bandwidth * 1e6
        rows.append({
            "tokens": tokens, "layer_us": layer_us, "distinct_experts": distinct, "floor_us": floor_us,
            "pct_of_floor": 100 * floor_us / layer_us, "eager_layer_us": eager_us, "invariant_layer_us": invariant_us,
            "invariant_pct_of_floor": 100 * floor_us / invariant_us, "kernels": kernels,
            "invariant_kernels": invariant_kernels,
            "grouped_mm_gate_up_us": gate_up_us,
            "grouped_mm_gate_up_floor_us": gate_up_floor_us,
            "grouped_mm_gate_up_pct_of_floor": 100 * gate_up_floor_us / gate_up_us,
        })
        del inputs
        torch.cuda.empty_cache()

    print(f"device {torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1e9:.0f} GB/s, {sets} weight set(s)\n")
    print("| tokens | layer us (graph) | distinct experts | floor us | % of floor | eager us | batch-invariant layer us | "
          "% of floor | _grouped_mm gate_up us | % of its floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['tokens']} | {r['layer_us']:.1f} | {r['distinct_experts']:.1f} | {r['floor_us']:.1f} | "
              f"{r['pct_of_floor']:.1f} | {r['eager_layer_us']:.1f} | {r['invariant_layer_us']:.1f} | {r['invariant_pct_of_floor']:.1f} | "
              f"{r['grouped_mm_gate_up_us']:.1f} | {r['grouped_mm_gate_up_pct_of_floor']:.1f} |")
    for r in rows:
        for key, layer in (("kernels", "the layer"), ("invariant_kernels", "the batch-invariant layer")):
            if r[key]:
                print(f"\nkernels of {layer} at {r['tokens']} token(s), us per call (% of kernel time):")
                for name, us, pct in r[key]:
                    print(f"  {us:8.1f}  {pct:5.1f}%  {name}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_moe.json")
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bandwidth_bytes_per_s": bandwidth,
                   "weight_sets": sets, "router_bias": args.router_bias, "rows": rows}, f, indent=2)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
