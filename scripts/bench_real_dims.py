"""P4: decode and verify steps of a 2-layer DeepSeek-V3 stack at real dimensions against their floor.

Random bf16 weights built on the GPU (no checkpoint): hidden 7168, q_lora 1536, kv_lora 512, rope 64,
nope 128, v 128, 128 heads, 256 experts top-8 in 8 groups top-4, 1 shared expert, expert inter 2048,
routed scaling 2.5, vocabulary 129280, both layers MoE, plus one MTP layer of the same shape (it drafts
for k > 0; its drafts are random, so every verify step verifies k drafts). Each of B sequences has a
4096-token context; the engine runs with CUDA graphs and the fixed policy. The step time is the engine's
own CUDA-event time of the target step, averaged over the steps in which every sequence decodes.
`--batch-invariant both` runs the same weights with the default and the batch-invariant kernels.
`--acceptance P` measures P1: for k > 0 the drafts are the k = 0 run's outputs, each right with probability P
(the MTP layer still drafts; Engine.override_drafts replaces its drafts), and the speedup in tokens per wall
second is compared with its ideal from the engine's device times.

Floor = bytes the step must read / device copy bandwidth (1 GiB copy_ in the same run): every attention
weight, the shared expert and router, the expected distinct routed experts for B * (k + 1) tokens under
uniform routing, the head, and the latent KV of every sequence in both layers.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from gpu_timing import copy_bandwidth, kernel_times
from mtpserve import _C
from mtpserve.config import parse_config
from mtpserve.sampling_params import SamplingParams

H, Q_LORA, KV_LORA, ROPE, NOPE, V_DIM, HEADS = 7168, 1536, 512, 64, 128, 128, 128
EXPERTS, TOP_K, INTER, VOCAB, LAYERS = 256, 8, 2048, 129280, 2
CONTEXT, BLOCK = 4096, 64
BF16 = 2
CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": VOCAB,
    "hidden_size": H, "intermediate_size": 18432, "moe_intermediate_size": INTER, "num_hidden_layers": LAYERS,
    "num_nextn_predict_layers": 1, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
    "n_shared_experts": 1, "n_routed_experts": EXPERTS, "routed_scaling_factor": 2.5, "kv_lora_rank": KV_LORA,
    "q_lora_rank": Q_LORA, "qk_rope_head_dim": ROPE, "v_head_dim": V_DIM, "qk_nope_head_dim": NOPE,
    "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4, "num_experts_per_tok": TOP_K,
    "first_k_dense_replace": 0, "norm_topk_prob": True, "scoring_func": "sigmoid", "hidden_act": "silu",
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "rope_theta": 10000, "tie_word_embeddings": False,
    "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16",
}


def randn(*shape, scale=None):
    t = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    return t.mul_(scale if scale is not None else shape[-1] ** -0.5)


def layer_weights(layer: int) -> dict[str, torch.Tensor]:
    p = f"model.layers.{layer}."
    ones = lambda n: torch.ones(n, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    return {
        p + "input_layernorm.weight": ones(H), p + "post_attention_layernorm.weight": ones(H),
        p + "self_attn.q_a_proj.weight": randn(Q_LORA, H), p + "self_attn.q_a_layernorm.weight": ones(Q_LORA),
        p + "self_attn.q_b_proj.weight": randn(HEADS * (NOPE + ROPE), Q_LORA),
        p + "self_attn.kv_a_proj_with_mqa.weight": randn(KV_LORA + ROPE, H),
        p + "self_attn.kv_a_layernorm.weight": ones(KV_LORA),
        p + "self_attn.kv_b_proj.weight": randn(HEADS * (NOPE + V_DIM), KV_LORA),
        p + "self_attn.o_proj.weight": randn(H, HEADS * V_DIM),
        p + "mlp.gate.weight": randn(EXPERTS, H), p + "mlp.gate.e_score_correction_bias":
            torch.zeros(EXPERTS, device="cuda"),
        _C.stacked_gate_up(p + "mlp."): randn(EXPERTS, 2 * INTER, H),
        _C.stacked_down(p + "mlp."): randn(EXPERTS, H, INTER),
        p + "mlp.shared_experts.gate_proj.weight": randn(INTER, H),
        p + "mlp.shared_experts.up_proj.weight": randn(INTER, H),
        p + "mlp.shared_experts.down_proj.weight": randn(H, INTER),
    }


def build_weights() -> dict[str, torch.Tensor]:
    weights = {"model.embed_tokens.weight": randn(VOCAB, H, scale=1.0), "lm_head.weight": randn(VOCAB, H),
               "model.norm.weight": torch.ones(H, device="cuda", dtype=torch.bfloat16)}
    for layer in range(LAYERS + 1):
        weights |= layer_weights(layer)
    mtp = f"model.layers.{LAYERS}."
    weights |= {mtp + "enorm.weight": weights["model.norm.weight"], mtp + "hnorm.weight": weights["model.norm.weight"],
                mtp + "shared_head.norm.weight": weights["model.norm.weight"], mtp + "eh_proj.weight": randn(H, 2 * H)}
    return weights


def build_model(weights, batch_invariant: bool):
    """The target and MTP layer over `weights` (shared, not copied), on the default or batch-invariant kernels."""
    config = parse_config(CONFIG)
    config.cpp.batch_invariant = batch_invariant
    target = _C.DeepSeekV3(config.cpp, weights)
    return config, target, _C.MtpLayer(config.cpp, weights, LAYERS, target)


def engine(config, target, mtp, caches, mtp_cache, k: int, batch: int) -> _C.Engine:
    c = _C.EngineConfig()
    c.block_size, c.num_blocks = BLOCK, caches[0].shape[0]
    c.max_model_len = CONTEXT + 256
    c.eos_token_ids = [1]
    c.num_speculative_tokens = k
    c.speculative_policy = _C.SpeculationPolicyKind.fixed
    c.graph_max_batch = batch
    s = _C.SchedulerConfig()
    s.max_tokens_per_batch, s.max_seqs_per_batch, s.num_speculative_tokens = 4096, batch, k
    c.scheduler = s
    return _C.Engine(c, target, caches, mtp if k else None, mtp_cache if k else None)


def decode_window(eng, prompts, max_tokens: int, tag: str, futures=None, profile: bool = False) -> dict:
    """The window in which every sequence decodes (from the moment all have their first token to the moment
    the first one finishes): device seconds per target step and per drafting, steps, wall seconds, tokens
    emitted and drafts accepted in it, and every sequence's output. `futures`: drafts injected per sequence
    (Engine.override_drafts: the MTP layer still runs, its drafts are replaced). `profile`: the window's
    kernels under torch.profiler, as "kernels" (name, us per step, share)."""
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True).to_cpp()
    for i, prompt in enumerate(prompts):
        eng.add_request(f"{tag}-{i}", prompt, params)
        if futures is not None:
            eng.override_drafts(f"{tag}-{i}", futures[i])
    outputs, finished, start, end, emitted = {}, 0, None, None, 0
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) if profile else None
    while finished < len(prompts):
        for o in eng.get_outputs(1.0):
            outputs.setdefault(o.request_id, []).extend(o.token_ids)
            emitted += len(o.token_ids) if start is not None and end is None else 0
            finished += o.finished
        if eng.error():
            raise RuntimeError(eng.error())
        if start is None and len(outputs) == len(prompts):
            start, started = eng.stats(), time.perf_counter()
            if prof:
                prof.start()
        if end is None and finished:
            end, ended = eng.stats(), time.perf_counter()
            if prof:
                torch.cuda.synchronize()
                prof.stop()
    steps = end.steps - start.steps
    return {"target_s": (end.target_seconds - start.target_seconds) / steps,
            "draft_s": (end.draft_seconds - start.draft_seconds) / steps, "steps": steps,
            "wall_s": ended - started, "tokens": emitted,
            "accepted": end.spec.accepted_tokens - start.spec.accepted_tokens,
            "outputs": [outputs[f"{tag}-{i}"] for i in range(len(prompts))],
            "kernels": kernel_times(prof, steps)[:15] if prof else []}


def with_acceptance(outputs: list[list[int]], rate: float, gen: torch.Generator) -> list[list[int]]:
    """Each greedy output with every token replaced, with probability 1 - rate, by another token: as drafts,
    each is right with probability `rate` (the first wrong one ends a step's accepted run)."""
    futures = []
    for out in outputs:
        wrong = torch.rand(len(out), generator=gen) >= rate
        other = torch.randint(2, VOCAB, (len(out),), generator=gen)
        futures.append([(t + 1 if o == t else o) if w else t for t, w, o in zip(out, wrong.tolist(), other.tolist())])
    return futures


def floor_bytes(batch: int, k: int) -> float:
    tokens = batch * (k + 1)
    attention = (Q_LORA * H + HEADS * (NOPE + ROPE) * Q_LORA + (KV_LORA + ROPE) * H + HEADS * (NOPE + V_DIM) * KV_LORA
                 + H * HEADS * V_DIM) * BF16
    distinct = EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** tokens)
    moe = (distinct + 1) * 3 * H * INTER * BF16 + EXPERTS * H * 4
    kv = batch * CONTEXT * (KV_LORA + ROPE) * BF16
    return LAYERS * (attention + moe + kv) + VOCAB * H * BF16


def p1(w: dict, reference: dict, batch: int, k: int) -> dict:
    """P1 for one k against the k = 0 run: the measured speedup (tokens per wall second in the decode
    window) and its ideal, (1 + accepted drafts per sequence-step) x t0 / (t_verify + t_draft), all device
    times from the same run; and the verify step's cost over t0 against the ratio of their floors."""
    accepted = w["accepted"] / (w["steps"] * batch)
    t0 = reference["target_s"]
    ideal = (1 + accepted) * t0 / (w["target_s"] + w["draft_s"])
    speedup = (w["tokens"] / w["wall_s"]) / (reference["tokens"] / reference["wall_s"])
    return {"accepted_per_step": accepted, "draft_us": w["draft_s"] * 1e6, "speedup": speedup, "ideal": ideal,
            "speedup_over_ideal": speedup / ideal, "verify_over_t0": w["target_s"] / t0,
            "floor_ratio": floor_bytes(batch, k) / floor_bytes(batch, 0)}


def print_p1(results: list[dict], rate: float) -> None:
    print(f"\nP1, injected drafts each right with probability {rate}:\n")
    print("| B | k | accepted / step | t_verify / t0 | floor ratio | draft µs | speedup | ideal | speedup / ideal |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "ideal" in r:
            print(f"| {r['batch']} | {r['k']} | {r['accepted_per_step']:.2f} | {r['verify_over_t0']:.2f} | "
                  f"{r['floor_ratio']:.2f} | {r['draft_us']:.0f} | {r['speedup']:.2f} | {r['ideal']:.2f} | "
                  f"{r['speedup_over_ideal']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--ks", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--decode-tokens", type=int, default=48)
    parser.add_argument("--batch-invariant", choices=("off", "on", "both"), default="off")
    parser.add_argument("--acceptance", type=float, default=None,
                        help="P1: for k > 0, inject drafts taken from the k = 0 run's outputs, each right with this "
                             "probability, and compare the speedup with its ideal")
    parser.add_argument("--profile", action="store_true", help="print each run's kernels per decode step")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.acceptance is not None and args.ks[0] != 0:
        parser.error("--acceptance needs k = 0 first in --ks: its outputs are the injected drafts")
    bandwidth = copy_bandwidth(20)
    weights = build_weights()
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.batch_invariant]
    blocks = max(args.batches) * ((CONTEXT + 256) // BLOCK + 1) + 8
    caches = [torch.zeros(blocks, BLOCK, KV_LORA + ROPE, device="cuda", dtype=torch.bfloat16) for _ in range(LAYERS)]
    mtp_cache = torch.zeros_like(caches[0])
    gen = torch.Generator().manual_seed(0)
    results = []
    for invariant in modes:
        config, target, mtp = build_model(weights, invariant)
        for batch in args.batches:
            prompts = [torch.randint(2, VOCAB, (CONTEXT,), generator=gen).tolist() for _ in range(batch)]
            reference = None
            for k in args.ks:
                eng = engine(config, target, mtp, caches, mtp_cache, k, batch)
                futures = None
                if k > 0 and args.acceptance is not None:
                    futures = with_acceptance(reference["outputs"], args.acceptance, gen)
                # Prefill takes about one step per sequence: long enough outputs leave a window of pure decode.
                w = decode_window(eng, prompts, 2 * batch + args.decode_tokens, f"b{batch}k{k}", futures, args.profile)
                eng.shutdown()
                reference = reference or w
                floor_s = floor_bytes(batch, k) / bandwidth
                r = {"batch_invariant": invariant, "batch": batch, "k": k, "step_us": w["target_s"] * 1e6,
                     "floor_us": floor_s * 1e6, "percent_of_floor": 100 * floor_s / w["target_s"],
                     "draft_us": w["draft_s"] * 1e6, "decode_steps": w["steps"], "kernels": w["kernels"]}
                if futures is not None:
                    r |= p1(w, reference, batch, k)
                results.append(r)
                print(json.dumps(r), flush=True)
        del target, mtp
    base = {(r["batch_invariant"], r["batch"]): r["step_us"] for r in results if r["k"] == 0}
    default = {(r["batch"], r["k"]): r["step_us"] for r in results if not r["batch_invariant"]}
    print(f"\ncopy bandwidth {bandwidth / 1e9:.0f} GB/s ({torch.cuda.get_device_name(0)})\n")
    print("| batch-invariant | B | k | step µs | floor µs | % of floor | step / (k = 0 step) "
          "| step / default mode's |\n|---|---|---|---|---|---|---|---|")
    for r in results:
        ratio = r["step_us"] / base.get((r["batch_invariant"], r["batch"]), float("nan"))
        cost = r["step_us"] / default.get((r["batch"], r["k"]), float("nan"))
        print(f"| {'on' if r['batch_invariant'] else 'off'} | {r['batch']} | {r['k']} | {r['step_us']:.0f} | "
              f"{r['floor_us']:.0f} | {r['percent_of_floor']:.0f}% | {ratio:.2f} | {cost:.2f} |")
    if args.acceptance is not None:
        print_p1(results, args.acceptance)
    for r in results:
        if r["kernels"]:
            busy = sum(us for _, us, _ in r["kernels"]) / sum(share for _, _, share in r["kernels"]) * 100
            print(f"\nB = {r['batch']}, k = {r['k']}: target step {r['step_us']:.0f} us + drafting {r['draft_us']:.0f} us "
                  f"(engine's CUDA events); kernels {busy:.0f} us per step, the 15 longest, us (share):")
            for name, us, share in r["kernels"]:
                print(f"  {us:8.1f}  {share:5.1f}%  {name}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "copy_bandwidth": bandwidth, "results": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
