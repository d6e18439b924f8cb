"""Tensor parallel over NCCL against one GPU: TP = 2 (one GPU per rank) vs TP = 1, greedy, k = 0.

For each model (the embedded one, and with --random-layers N > 0 a bigger random DeepSeek-V3 checkpoint
written first) and dtype: decode tokens/s at each batch size (output tokens over the wall time of a
generate call, prefill of the short prompts included, after a warm-up), TP = 1 and TP = 2 each eager and
with CUDA graphs, the greedy divergence of TP = 2 from TP = 1 eager and of TP = 2's graphs from its eager
run (sequences whose output differs, and where), and per rank the peak host RSS and GPU memory
once the model is loaded (sharded loading: each rank reads only its slices; the latent KV cache, which
TP replicates, is the same fixed size everywhere) and at the end of the eager run.

Every rank is its own process (TP = 1 too, so that its memory is measured alike). Needs two GPUs; NVLink
multicast is kept off. One command: python3 scripts/bench_tensor_parallel.py --out DIR (default $OUT).
Writes tensor_parallel.json and tensor_parallel.md there. --profile also records each TP = 2 rank's graphs
run with torch.profiler (host and GPU) and writes its busiest ops to tp2_profile_rank0_batch<b>.txt (rank 0,
each batch's timed call) and tp2_profile_rank1.txt (rank 1's whole run): where a TP = 2 step's time goes.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

for _name, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                      ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_name, _value)

from mtpserve import distributed  # noqa: E402
from mtpserve.engine import EngineCore, WorkerCore  # noqa: E402
from mtpserve.engine_args import DEFAULT_MODEL, EngineArgs  # noqa: E402
from mtpserve.launch import free_port_pair  # noqa: E402
from mtpserve.sampling_params import SamplingParams  # noqa: E402

BLOCK = 16


def random_checkpoint(path: Path, layers: int) -> Path:
    """A random DeepSeek-V3 checkpoint (bf16, per-expert tensors as DeepSeek stores them, first layer dense,
    one MTP layer) with the embedded model's tokenizer: hidden 2048, 16 heads, 64 experts top-6."""
    from safetensors.torch import save_file

    h, heads, q_lora, kv_lora, rope, nope, v, experts, inter, moe_inter, vocab = (
        2048, 16, 512, 256, 32, 64, 64, 64, 5632, 512, 32768)
    config = json.loads((DEFAULT_MODEL / "config.json").read_text()) | {
        "vocab_size": vocab, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": heads, "q_lora_rank": q_lora, "kv_lora_rank": kv_lora, "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope, "v_head_dim": v, "intermediate_size": inter, "moe_intermediate_size": moe_inter,
        "n_routed_experts": experts, "num_experts_per_tok": 6, "n_group": 8, "topk_group": 4,
        "first_k_dense_replace": 1, "max_position_embeddings": 4096}
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return (torch.randn(*shape, generator=g) * shape[-1] ** -0.5).to(torch.bfloat16)

    def ones(n):
        return torch.ones(n, dtype=torch.bfloat16)

    tensors = {"model.embed_tokens.weight": randn(vocab, h), "lm_head.weight": randn(vocab, h),
               "model.norm.weight": ones(h)}
    for layer in range(layers + 1):
        p = f"model.layers.{layer}."
        tensors |= {p + "input_layernorm.weight": ones(h), p + "post_attention_layernorm.weight": ones(h),
                    p + "self_attn.q_a_proj.weight": randn(q_lora, h),
                    p + "self_attn.q_a_layernorm.weight": ones(q_lora),
                    p + "self_attn.q_b_proj.weight": randn(heads * (nope + rope), q_lora),
                    p + "self_attn.kv_a_proj_with_mqa.weight": randn(kv_lora + rope, h),
                    p + "self_attn.kv_a_layernorm.weight": ones(kv_lora),
                    p + "self_attn.kv_b_proj.weight": randn(heads * (nope + v), kv_lora),
                    p + "self_attn.o_proj.weight": randn(h, heads * v)}
        if layer == 0:
            tensors |= {p + "mlp.gate_proj.weight": randn(inter, h), p + "mlp.up_proj.weight": randn(inter, h),
                        p + "mlp.down_proj.weight": randn(h, inter)}
            continue
        tensors |= {p + "mlp.gate.weight": randn(experts, h),
                    p + "mlp.gate.e_score_correction_bias": torch.randn(experts, generator=g) * 0.1,
                    p + "mlp.shared_experts.gate_proj.weight": randn(moe_inter, h),
                    p + "mlp.shared_experts.up_proj.weight": randn(moe_inter, h),
                    p + "mlp.shared_experts.down_proj.weight": randn(h, moe_inter)}
        for e in range(experts):
            tensors |= {p + f"mlp.experts.{e}.gate_proj.weight": randn(moe_inter, h),
                        p + f"mlp.experts.{e}.up_proj.weight": randn(moe_inter, h),
                        p + f"mlp.experts.{e}.down_proj.weight": randn(h, moe_inter)}
    mtp = f"model.layers.{layers}."
    tensors |= {mtp + "enorm.weight": ones(h), mtp + "hnorm.weight": ones(h), mtp + "shared_head.norm.weight": ones(h),
                mtp + "eh_proj.weight": randn(h, 2 * h)}
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(DEFAULT_MODEL / name, path / name)
    return path


def host_memory_mib(field: str) -> float:
    """VmHWM (peak) or VmRSS of this process from /proc: unlike getrusage's ru_maxrss, the peak is that of
    this process's own memory, not inherited from the parent that spawned it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory(device: str) -> dict:
    gpu = device.startswith("cuda")
    return {"host_peak_rss_mib": host_memory_mib("VmHWM"), "host_rss_mib": host_memory_mib("VmRSS"),
            "gpu_allocated_mib": torch.cuda.memory_allocated(device) / 2**20 if gpu else 0.0,
            "gpu_peak_allocated_mib": torch.cuda.max_memory_allocated(device) / 2**20 if gpu else 0.0,
            "gpu_peak_reserved_mib": torch.cuda.max_memory_reserved(device) / 2**20 if gpu else 0.0}


def generate(core: EngineCore, prompts: list[list[int]], max_tokens: int) -> tuple[list[list[int]], float]:
    params = SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True).to_cpp()
    out = {str(i): [] for i in range(len(prompts))}
    start = time.perf_counter()
    for i, prompt in enumerate(prompts):
        core.engine.add_request(str(i), prompt, params)
    pending = set(out)
    while pending:
        for delta in core.engine.get_outputs(0.5):
            if delta.error:
                raise RuntimeError(delta.error)
            out[delta.request_id] += delta.token_ids
            if delta.finished:
                pending.discard(delta.request_id)
    return [out[str(i)] for i in range(len(prompts))], time.perf_counter() - start


def profiled(enabled: bool, out: Path):
    """A torch.profiler context over the host and the GPU that writes its busiest ops to `out` (or nothing)."""
    import contextlib

    if not enabled:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def run():
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        # Rank 0's engine steps on its own thread, which the profiler records only when told to.
        every_thread = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
        with torch.profiler.profile(activities=activities, experimental_config=every_thread) as prof:
            yield
        averages = prof.key_averages()
        out.write_text("by host time (self):\n" + averages.table(sort_by="self_cpu_time_total", row_limit=25) +
                       "\nby GPU time (self):\n" + averages.table(sort_by="self_device_time_total", row_limit=25))

    return run()


def rank_main(rank: int, world: int, port: int, model: str, dtype: str, batches: list[int], prompt_len: int,
              max_tokens: int, graphs: list[bool], result_file: str, cpu: bool, profile_dir: str | None) -> None:
    device = "cpu" if cpu else f"cuda:{rank}"
    if not cpu:  # the allocator's memory stats exist once the device has allocated
        torch.cuda.set_device(device)
        torch.zeros(1, device=device)
    tp = distributed.init_tensor_parallel(rank, world, f"127.0.0.1:{port}", device) if world > 1 else None
    blocks = max(batches) * -(-(prompt_len + max_tokens + 1) // BLOCK) + 8
    result: dict = {"rank": rank, "runs": []}
    try:
        for graph in graphs:
            args = EngineArgs(model=model, devices=device, dtype=dtype, block_size=BLOCK, max_cache_blocks=blocks,
                              enable_graph=graph, max_seqs_per_batch=max(batches))
            if not cpu:
                torch.cuda.reset_peak_memory_stats(device)
            # The last run of the list is the one with graphs (eager on the CPU's dry run).
            profile = profile_dir is not None and graph == graphs[-1] and world > 1
            if rank > 0:
                worker = WorkerCore(args, tp, lambda n, shared: n)
                loaded = memory(device)
                with profiled(profile, Path(profile_dir or ".") / f"tp{world}_profile_rank{rank}.txt"):
                    worker.run()
                result["runs"].append({"graphs": graph, "loaded": loaded, "end": memory(device)})
                del worker
                continue
            core = EngineCore(args, tp=tp, agree_num_blocks=(lambda n, shared: n) if tp else None)
            run = {"graphs": graph, "loaded": memory(device), "batches": []}
            g = torch.Generator().manual_seed(1)
            try:
                for batch in batches:
                    prompts = torch.randint(2, 8000, (batch, prompt_len), generator=g).tolist()
                    generate(core, prompts[:1], 8)  # warm-up
                    with profiled(profile, Path(profile_dir or ".") / f"tp{world}_profile_rank0_batch{batch}.txt"):
                        tokens, seconds = generate(core, prompts, max_tokens)
                    run["batches"].append({"batch": batch, "tokens_per_s": batch * max_tokens / seconds,
                                           "seconds": seconds, "tokens": tokens})
                run["end"] = memory(device)
            finally:
                core.shutdown()
            result["runs"].append(run)
            del core  # before the next engine loads its own copy
            if not cpu:
                torch.cuda.empty_cache()
    finally:
        if tp is not None:
            distributed.destroy()
    Path(f"{result_file}.rank{rank}").write_text(json.dumps(result))



def run_group(world: int, model: str, dtype: str, ns, graphs: list[bool], work: Path) -> list[dict]:
    result_file = str(work / f"tp{world}")
    mp.spawn(rank_main, args=(world, free_port_pair(), model, dtype, ns.batch_sizes, ns.prompt_len, ns.max_tokens,
                              graphs, result_file, ns.cpu, ns.out if ns.profile else None), nprocs=world, join=True)
    return [json.loads(Path(f"{result_file}.rank{r}").read_text()) for r in range(world)]


def divergence(got: list[list[int]], reference: list[list[int]]) -> dict:
    firsts = [next((j for j, (a, b) in enumerate(zip(g, r)) if a != b), None) for g, r in zip(got, reference)]
    diverged = [f for f in firsts if f is not None]
    return {"sequences": len(reference), "diverged": len(diverged),
            "rate": len(diverged) / len(reference), "first_positions": sorted(diverged)}


def bench(name: str, model: str, dtype: str, ns, work: Path) -> dict:
    one = run_group(1, model, dtype, ns, [False, not ns.cpu], work)
    two = run_group(2, model, dtype, ns, [False, not ns.cpu], work)
    eager1, graphs1, eager2, graphs2 = one[0]["runs"][0], one[0]["runs"][1], two[0]["runs"][0], two[0]["runs"][1]
    rows = []
    for b1, g1, b2, g2 in zip(eager1["batches"], graphs1["batches"], eager2["batches"], graphs2["batches"]):
        rows.append({"batch": b1["batch"], "tp1_eager_tokens_per_s": b1["tokens_per_s"],
                     "tp1_graphs_tokens_per_s": g1["tokens_per_s"], "tp2_tokens_per_s": b2["tokens_per_s"],
                     "tp2_graphs_tokens_per_s": g2["tokens_per_s"],
                     "tp2_over_tp1_eager": b2["tokens_per_s"] / b1["tokens_per_s"],
                     "tp2_over_tp1_graphs": g2["tokens_per_s"] / g1["tokens_per_s"],
                     "divergence_tp2_vs_tp1": divergence(b2["tokens"], b1["tokens"]),
                     "divergence_tp2_graphs_vs_eager": divergence(g2["tokens"], b2["tokens"])})
    memory_rows = [{"tp": 1, "rank": 0, **{k: eager1[k] for k in ("loaded", "end")}}]
    memory_rows += [{"tp": 2, "rank": r["rank"], **{k: r["runs"][0][k] for k in ("loaded", "end")}} for r in two]
    return {"model": name, "dtype": dtype, "throughput": rows, "memory": memory_rows}


def markdown(results: list[dict], header: str) -> str:
    lines = [header, ""]
    for r in results:
        lines += [f"### {r['model']} ({r['dtype']})", "",
                  "| batch | TP1 eager tok/s | TP1 graphs tok/s | TP2 eager tok/s | TP2 graphs tok/s | "
                  "TP2 / TP1 eager | TP2 / TP1 graphs | TP2 vs TP1 eager: diverged | TP2 graphs vs eager: diverged |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for t in r["throughput"]:
            d, g = t["divergence_tp2_vs_tp1"], t["divergence_tp2_graphs_vs_eager"]
            lines.append(f"| {t['batch']} | {t['tp1_eager_tokens_per_s']:.0f} | {t['tp1_graphs_tokens_per_s']:.0f} | "
                         f"{t['tp2_tokens_per_s']:.0f} | {t['tp2_graphs_tokens_per_s']:.0f} | "
                         f"{t['tp2_over_tp1_eager']:.2f} | {t['tp2_over_tp1_graphs']:.2f} | "
                         f"{d['diverged']}/{d['sequences']} (first at {d['first_positions'][:5]}) | "
                         f"{g['diverged']}/{g['sequences']} (first at {g['first_positions'][:5]}) |")
        lines += ["", "| TP | rank | host peak RSS loaded (MiB) | GPU allocated loaded (MiB) | host peak RSS end | "
                  "GPU peak allocated end |", "|---:|---:|---:|---:|---:|---:|"]
        for m in r["memory"]:
            lines.append(f"| {m['tp']} | {m['rank']} | {m['loaded']['host_peak_rss_mib']:.0f} | "
                         f"{m['loaded']['gpu_allocated_mib']:.0f} | {m['end']['host_peak_rss_mib']:.0f} | "
                         f"{m['end']['gpu_peak_allocated_mib']:.0f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--random-layers", type=int, default=4,
                        help="also a random hidden-2048, 64-expert checkpoint of this many layers (0: none)")
    parser.add_argument("--cpu", action="store_true", help="a dry run of this script on the CPU (gloo, no graphs)")
    parser.add_argument("--profile", action="store_true",
                        help="torch.profiler on every TP = 2 rank during its graphs run: tp2_profile_rank*.txt")
    ns = parser.parse_args()
    if not ns.cpu and torch.cuda.device_count() < 2:
        raise SystemExit(f"needs two GPUs, torch sees {torch.cuda.device_count()}")
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models = [("embedded (tiny-dsv3-mtp)", str(DEFAULT_MODEL))]
        if ns.random_layers > 0:
            models.append((f"random {ns.random_layers}-layer, hidden 2048, 64 experts top-6",
                           str(random_checkpoint(work / "random", ns.random_layers))))
        for name, model in models:
            for dtype in ns.dtypes:
                results.append(bench(name, model, dtype, ns, work))
                print(json.dumps({k: v for k, v in results[-1].items() if k != "throughput"}), flush=True)
    where = "CPU" if ns.cpu else f"{torch.cuda.get_device_name(0)} x2"
    header = (f"## Tensor parallel: TP2 vs TP1 ({where}, torch {torch.__version__}, "
              f"{time.strftime('%Y-%m-%d')}; prompts {ns.prompt_len} tokens, {ns.max_tokens} new tokens, greedy)")
    table = markdown(results, header)
    (out / "tensor_parallel.json").write_text(json.dumps(results, indent=1))
    (out / "tensor_parallel.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
