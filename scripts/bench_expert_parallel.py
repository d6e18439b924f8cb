"""EP = 2 vs TP = 2 for one real-dims DeepSeek-V3 MoE layer on two GPUs (issue 18): step time and bytes per rank.

The layer: hidden 7168, 256 routed experts top-8 in 8 groups top-4, expert inter 2048, 1 shared expert,
bf16, random weights (routing close to uniform). At each of T = 1..256 tokens per step every rank runs
the layer on the same T rows (as under tensor-parallel attention), then the layer's all-reduce:
- TP: every routed expert split on its intermediate dim; a rank reads its half of each chosen expert.
- EP: rank r holds experts [r E / N, (r + 1) E / N) whole; (token, expert) pairs go to their owner and
  back by all-to-all (mtpserve's ExpertDispatch), then the same all-reduce.
The shared expert is tensor parallel in both. Times: CUDA-event medians of --reps steps on rank 0 after
warm-up. Bytes per rank (rank 0, computed from the step's routing): routed-expert weights read, shared
expert and router weights, and bytes it sends (a ring all-reduce sends 2 (N - 1) / N of the rows; EP's
dispatch and combine send each pair whose expert lives on the other rank, one row each way).

One command: python3 scripts/bench_expert_parallel.py --out DIR (default $OUT); --small runs a tiny
layer on the CPU over gloo (a dry run). Writes expert_parallel.json and expert_parallel.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

for _name, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                      ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_name, _value)

from mtpserve import _C, distributed  # noqa: E402
from mtpserve.config import parse_config  # noqa: E402
from mtpserve.launch import free_port_pair  # noqa: E402

REAL = dict(hidden=7168, experts=256, top_k=8, n_group=8, topk_group=4, inter=2048)
SMALL = dict(hidden=256, experts=16, top_k=4, n_group=4, topk_group=2, inter=64)
PREFIX = "model.layers.0.mlp."
BF16 = 2


def layer_config(d: dict):
    return parse_config({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 1024,
        "hidden_size": d["hidden"], "intermediate_size": d["inter"], "moe_intermediate_size": d["inter"],
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "n_shared_experts": 1,
        "n_routed_experts": d["experts"], "routed_scaling_factor": 2.5, "kv_lora_rank": 64, "q_lora_rank": None,
        "qk_rope_head_dim": 16, "v_head_dim": 32, "qk_nope_head_dim": 32, "topk_method": "noaux_tc",
        "n_group": d["n_group"], "topk_group": d["topk_group"], "num_experts_per_tok": d["top_k"],
        "first_k_dense_replace": 0, "norm_topk_prob": True, "scoring_func": "sigmoid", "hidden_act": "silu",
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16"})


def router(d: dict, device: str) -> torch.Tensor:
    """Seeded alike on every rank, so that all ranks route alike."""
    g = torch.Generator(device=device).manual_seed(0)
    return (torch.randn(d["experts"], d["hidden"], generator=g, device=device) * d["hidden"] ** -0.5).to(torch.bfloat16)


def layer_weights(d: dict, mode: str, rank: int, world: int, device: str) -> dict[str, torch.Tensor]:
    """This rank's tensors: the router, its part of the shared expert, its experts (EP) or slices (TP)."""
    h, e, inter = d["hidden"], d["experts"], d["inter"]
    g = torch.Generator(device=device).manual_seed(1 + rank)

    def randn(*shape):
        return (torch.randn(*shape, generator=g, device=device) * shape[-1] ** -0.5).to(torch.bfloat16)

    weights = {PREFIX + "gate.weight": router(d, device),
               PREFIX + "gate.e_score_correction_bias": torch.zeros(e, device=device)}
    part = inter // world
    weights |= {PREFIX + "shared_experts.gate_proj.weight": randn(part, h),
                PREFIX + "shared_experts.up_proj.weight": randn(part, h),
                PREFIX + "shared_experts.down_proj.weight": randn(h, part)}
    experts, width = (e // world, inter) if mode == "ep" else (e, part)
    weights |= {_C.stacked_gate_up(PREFIX): randn(experts, 2 * width, h),
                _C.stacked_down(PREFIX): randn(experts, h, width)}
    return weights


def step_bytes(d: dict, mode: str, world: int, experts: torch.Tensor) -> dict:
    """Rank 0's bytes for one step whose routing chose `experts` [T, top_k]."""
    h, e, inter = d["hidden"], d["experts"], d["inter"]
    tokens = experts.size(0)
    per_expert = 3 * h * inter * BF16
    chosen = experts.unique()
    if mode == "ep":
        weights = int((chosen < e // world).sum()) * per_expert
        share = experts[: tokens // world] if world > 1 else experts  # rank 0's rows: [0, T / N)
        remote = int((share >= e // world).sum())
        received = int((experts[tokens // world:] < e // world).sum())  # pairs the other rank sends rank 0
        sent = (remote + received) * h * BF16  # rows out to their owner, and outputs back to their sender
    else:
        weights = chosen.numel() * per_expert // world
        sent = 0
    all_reduce = 2 * (world - 1) * tokens * h * BF16 // world
    return {"routed_weight_bytes": weights, "shared_and_router_bytes": per_expert // world + e * h * 4,
            "sent_bytes": sent + all_reduce}


def rank_main(rank, world, port, mode, dims, tokens_list, reps, result_file, cpu):
    device = "cpu" if cpu else f"cuda:{rank}"
    if not cpu:
        torch.cuda.set_device(device)
    tp = distributed.init_tensor_parallel(rank, world, f"127.0.0.1:{port}", device,
                                          ep_size=world if mode == "ep" else 1)
    try:
        config = layer_config(dims)
        moe = _C.MoE(config.cpp, layer_weights(dims, mode, rank, world, device), PREFIX, tp)
        gate = router(dims, device).float()
        rows = []
        for tokens in tokens_list:
            g = torch.Generator(device=device).manual_seed(tokens)
            x = torch.randn(tokens, dims["hidden"], generator=g, device=device).to(torch.bfloat16)
            times = []
            for i in range(reps + 3):
                start = time.perf_counter()
                if not cpu:
                    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    begin.record()
                tp.all_reduce(moe(x))
                if not cpu:
                    end.record()
                    end.synchronize()
                if i >= 3:
                    times.append(begin.elapsed_time(end) / 1e3 if not cpu else time.perf_counter() - start)
            _, experts = _C.route_noaux_tc(x.float() @ gate.t(), torch.zeros(dims["experts"], device=device),
                                           dims["n_group"], dims["topk_group"], dims["top_k"], True, 2.5)
            rows.append({"tokens": tokens, "step_us": statistics.median(times) * 1e6,
                         **step_bytes(dims, mode, world, experts.cpu())})
        if rank == 0:
            Path(result_file).write_text(json.dumps(rows))
    finally:
        distributed.destroy()



def markdown(results: dict, header: str) -> str:
    lines = [header, "", "| tokens | TP2 step (us) | EP2 step (us) | EP / TP | TP2 routed MB read | "
             "EP2 routed MB read | TP2 MB sent | EP2 MB sent |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t, e in zip(results["tp"], results["ep"]):
        lines.append(f"| {t['tokens']} | {t['step_us']:.0f} | {e['step_us']:.0f} | "
                     f"{e['step_us'] / t['step_us']:.2f} | "
                     f"{t['routed_weight_bytes'] / 1e6:.1f} | {e['routed_weight_bytes'] / 1e6:.1f} | "
                     f"{t['sent_bytes'] / 1e6:.2f} | {e['sent_bytes'] / 1e6:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--small", action="store_true", help="a tiny layer on the CPU over gloo (a dry run)")
    ns = parser.parse_args()
    if not ns.small and torch.cuda.device_count() < 2:
        raise SystemExit(f"needs two GPUs, torch sees {torch.cuda.device_count()}")
    dims = SMALL if ns.small else REAL
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for mode in ("tp", "ep"):
        result_file = out / f"expert_parallel_{mode}.part"
        mp.spawn(rank_main, args=(2, free_port_pair(), mode, dims, ns.tokens, ns.reps, str(result_file),
                                  ns.small), nprocs=2, join=True)
        results[mode] = json.loads(result_file.read_text())
        result_file.unlink()
    where = "CPU (gloo), small layer" if ns.small else f"{torch.cuda.get_device_name(0)} x2 (NCCL)"
    header = (f"## One MoE layer, EP2 vs TP2 ({where}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}; "
              f"hidden {dims['hidden']}, {dims['experts']} experts top-{dims['top_k']}, inter {dims['inter']}, bf16)")
    table = markdown(results, header)
    (out / "expert_parallel.json").write_text(json.dumps({"dims": dims, **results}, indent=1))
    (out / "expert_parallel.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
