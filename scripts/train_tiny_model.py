#!/usr/bin/env python3
"""Train the tiny DeepSeek-V3-architecture model (with one MTP layer) and export it in HF layout.

Pure PyTorch. The model math matches transformers' DeepseekV3ForCausalLM (MLA with q LoRA, interleaved RoPE,
dense layer 0, noaux_tc sigmoid-routed MoE with a shared expert) and HF's MtpLayer for layer 8:
    h' = block(eh_proj(cat[enorm(embed(t_{i+1})), hnorm(h_i)]));  mtp_logits = lm_head(shared_head.norm(h'))
where h_i is the main model's hidden state after its final norm; mtp_logits[i] predicts t_{i+2}.
For speed the tiny experts are computed densely for every token and combined with the (sparse) routing
weights, zeros for unselected experts: the same math as a sparse dispatch.

Train (GPU):  python3 scripts/train_tiny_model.py --data .data --out OUT --max-steps 3000 --time-budget 450
Consolidate shards into one model.safetensors:  python3 scripts/train_tiny_model.py --consolidate DIR
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 8192
    hidden_size: int = 256
    num_hidden_layers: int = 8
    num_nextn_predict_layers: int = 1
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    q_lora_rank: int = 128
    kv_lora_rank: int = 64
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 16
    v_head_dim: int = 32
    intermediate_size: int = 768
    moe_intermediate_size: int = 64
    n_routed_experts: int = 16
    n_shared_experts: int = 1
    num_experts_per_tok: int = 4
    n_group: int = 4
    topk_group: int = 2
    topk_method: str = "noaux_tc"
    scoring_func: str = "sigmoid"
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 2.5
    first_k_dense_replace: int = 1
    moe_layer_freq: int = 1
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    initializer_range: float = 0.02
    bos_token_id: int = 0
    eos_token_id: int = 1

    def hf_config(self) -> dict:
        d = asdict(self)
        d.update({
            "architectures": ["DeepseekV3ForCausalLM"],
            "model_type": "deepseek_v3",
            "torch_dtype": "bfloat16",
            "rope_scaling": None,
            "rope_interleave": True,
            "attention_bias": False,
            "attention_dropout": 0.0,
            "use_cache": True,
            "ep_size": 1,
        })
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


# ----------------------------------------------------------------------------------------------- model

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rope_cos_sin(cfg: Config, positions: torch.Tensor):
    """cos/sin of shape [T, rope_dim/2] (HF's first half of cat(freqs, freqs))."""
    d = cfg.qk_rope_head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float, device=positions.device) / d))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    return freqs.cos(), freqs.sin()


def apply_rope_interleave(x, cos, sin):
    """HF apply_rotary_pos_emb_interleave: pairs (x0,x1),(x2,x3).. rotated; output laid out [evens', odds']."""
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class MLA(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        H, dn, dr, dv = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        self.q_a_proj = nn.Linear(cfg.hidden_size, cfg.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
        self.q_b_proj = nn.Linear(cfg.q_lora_rank, H * (dn + dr), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(cfg.hidden_size, cfg.kv_lora_rank + dr, bias=False)
        self.kv_a_layernorm = RMSNorm(cfg.kv_lora_rank, cfg.rms_norm_eps)
        self.kv_b_proj = nn.Linear(cfg.kv_lora_rank, H * (dn + dv), bias=False)
        self.o_proj = nn.Linear(H * dv, cfg.hidden_size, bias=False)
        self.scale = (dn + dr) ** -0.5

    def forward(self, x, cos, sin, cache: dict | None = None):
        cfg = self.cfg
        B, T, _ = x.shape
        H, dn, dr, dv = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(B, T, H, dn + dr).transpose(1, 2)
        q_nope, q_rot = q.split([dn, dr], dim=-1)
        c, k_rot = self.kv_a_proj_with_mqa(x).split([cfg.kv_lora_rank, dr], dim=-1)
        c = self.kv_a_layernorm(c)
        k_rot = k_rot.reshape(B, 1, T, dr)
        q_rot = apply_rope_interleave(q_rot, cos, sin)
        k_rot = apply_rope_interleave(k_rot, cos, sin)
        kv = self.kv_b_proj(c).view(B, T, H, dn + dv).transpose(1, 2)
        k_nope, v = kv.split([dn, dv], dim=-1)
        k = torch.cat([k_nope, k_rot.expand(B, H, T, dr)], dim=-1)
        q = torch.cat([q_nope, q_rot], dim=-1)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        S = k.shape[2]
        if dv < dn + dr:  # pad V so q/k/v share a head dim (fast SDPA kernels); padded columns are dropped
            v = F.pad(v, (0, dn + dr - dv))
        if S == T:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        else:
            qpos = torch.arange(S - T, S, device=x.device)
            mask = torch.arange(S, device=x.device)[None, :] <= qpos[:, None]
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        o = o[..., :dv].transpose(1, 2).reshape(B, T, H * dv)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, dim, inter):
        super().__init__()
        self.gate_proj = nn.Linear(dim, inter, bias=False)
        self.up_proj = nn.Linear(dim, inter, bias=False)
        self.down_proj = nn.Linear(inter, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    """DeepseekV3TopkRouter (noaux_tc). e_score_correction_bias is an fp32 buffer changed only by balancing."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.weight = nn.Parameter(torch.zeros(cfg.n_routed_experts, cfg.hidden_size))
        self.register_buffer("e_score_correction_bias", torch.zeros(cfg.n_routed_experts, dtype=torch.float32))

    def forward(self, x2d):
        cfg = self.cfg
        E, G = cfg.n_routed_experts, cfg.n_group
        with torch.autocast(device_type=x2d.device.type, enabled=False):
            logits = F.linear(x2d.float(), self.weight.float())
        scores = logits.sigmoid()
        choice = scores + self.e_score_correction_bias
        group_scores = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=cfg.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E)
        choice = choice.masked_fill(~score_mask.bool(), float("-inf"))
        topk_idx = torch.topk(choice, k=cfg.num_experts_per_tok, dim=-1, sorted=False)[1]
        topk_w = scores.gather(1, topk_idx)
        if cfg.norm_topk_prob:
            topk_w = topk_w / (topk_w.sum(dim=-1, keepdim=True) + 1e-20)
        topk_w = topk_w * cfg.routed_scaling_factor
        return scores, topk_idx, topk_w


class MoE(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        E, I, D = cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.hidden_size
        self.gate = Router(cfg)
        # expert e: gate_proj = experts_gate_up[e, :I], up_proj = experts_gate_up[e, I:], down_proj = experts_down[e]
        self.experts_gate_up = nn.Parameter(torch.empty(E, 2 * I, D))
        self.experts_down = nn.Parameter(torch.empty(E, D, I))
        self.shared_experts = MLP(D, I * cfg.n_shared_experts)

    def forward(self, x):
        cfg = self.cfg
        E, I, D, K = cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.hidden_size, cfg.num_experts_per_tok
        shape = x.shape
        x2 = x.reshape(-1, D)
        N = x2.shape[0]
        scores, topk_idx, topk_w = self.gate(x2)
        comb = torch.zeros(N, E, dtype=topk_w.dtype, device=x.device).scatter(1, topk_idx, topk_w)
        # Dense compute of every routed expert, fused into two matmuls; the shared expert rides along separately.
        h = F.linear(x2, self.experts_gate_up.reshape(E * 2 * I, D)).view(N, E, 2, I)
        act = F.silu(h[:, :, 0]) * h[:, :, 1] * comb.unsqueeze(-1).to(h.dtype)
        w_down = self.experts_down.permute(1, 0, 2).reshape(D, E * I)
        out = F.linear(act.reshape(N, E * I), w_down) + self.shared_experts(x2)
        with torch.no_grad():
            load = torch.zeros(E, device=x.device, dtype=torch.float32).index_add_(
                0, topk_idx.reshape(-1), torch.ones(topk_idx.numel(), device=x.device))
        # sequence-wise balance loss (DeepSeek-V3 eq. 17-20), only meaningful for [B, T, D] input
        B = shape[0] if x.dim() == 3 else 1
        T = N // B
        sel = torch.zeros(N, E, device=x.device).scatter(1, topk_idx, 1.0).view(B, T, E)
        f = sel.mean(1) * (E / K)
        p = (scores / scores.sum(-1, keepdim=True)).view(B, T, E).mean(1)
        aux = (f * p).sum(-1).mean()
        return out.view(shape), aux, load


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config, layer_idx: int):
        super().__init__()
        self.self_attn = MLA(cfg)
        self.is_moe = layer_idx >= cfg.first_k_dense_replace
        self.mlp = MoE(cfg) if self.is_moe else MLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache)
        h = self.post_attention_layernorm(x)
        if self.is_moe:
            m, aux, load = self.mlp(h)
        else:
            m, aux, load = self.mlp(h), None, None
        return x + m, aux, load


class SharedHead(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class MTPLayer(DecoderLayer):
    """model.layers.{num_hidden_layers}: enorm, hnorm, eh_proj, shared_head.norm + a full decoder block."""

    def __init__(self, cfg: Config, layer_idx: int):
        super().__init__(cfg, layer_idx)
        self.enorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hnorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.shared_head = SharedHead(cfg)

    def forward_mtp(self, emb, h_prev, cos, sin, cache=None):
        x = self.eh_proj(torch.cat([self.enorm(emb), self.hnorm(h_prev)], dim=-1))
        x, aux, load = DecoderLayer.forward(self, x, cos, sin, cache)
        return self.shared_head.norm(x), aux, load


class Inner(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        L = cfg.num_hidden_layers
        layers = [DecoderLayer(cfg, i) for i in range(L)]
        layers += [MTPLayer(cfg, L + j) for j in range(cfg.num_nextn_predict_layers)]
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class TinyDeepseekV3(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.model = Inner(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    @property
    def mtp(self) -> MTPLayer:
        return self.model.layers[self.cfg.num_hidden_layers]

    def moe_routers(self):
        return [l.mlp.gate for l in self.model.layers if l.is_moe]

    def init_weights(self, seed: int):
        g = torch.Generator().manual_seed(seed)
        std = self.cfg.initializer_range
        out_std = std / math.sqrt(2 * (self.cfg.num_hidden_layers + 1))
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p) if name.endswith("norm.weight") else nn.init.zeros_(p)
            else:
                s = out_std if name.endswith(("o_proj.weight", "down_proj.weight", "experts_down")) else std
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=g) * s)
        for r in self.moe_routers():
            r.e_score_correction_bias.zero_()

    def forward_main(self, ids, start_pos: int = 0, caches=None):
        """Main model. Returns (h after final norm, logits, aux_sum, loads)."""
        T = ids.shape[1]
        cos, sin = rope_cos_sin(self.cfg, torch.arange(start_pos, start_pos + T, device=ids.device))
        x = self.model.embed_tokens(ids)
        aux_sum, loads = 0.0, []
        for i in range(self.cfg.num_hidden_layers):
            x, aux, load = self.model.layers[i](x, cos, sin, None if caches is None else caches[i])
            if aux is not None:
                aux_sum = aux_sum + aux
                loads.append(load)
        h = self.model.norm(x)
        return h, self.lm_head(h), aux_sum, loads

    def forward_mtp(self, next_ids, h_prev, start_pos: int, cache=None):
        """MTP layer. next_ids[:, j] = t_{p+1}, h_prev[:, j] = h_p for p = start_pos-1+j; logits predict t_{p+2}.
        RoPE positions are those of next_ids (start_pos..), as in HF's MtpModel (only differences matter)."""
        T = next_ids.shape[1]
        cos, sin = rope_cos_sin(self.cfg, torch.arange(start_pos, start_pos + T, device=next_ids.device))
        h, aux, load = self.mtp.forward_mtp(self.model.embed_tokens(next_ids), h_prev, cos, sin, cache)
        return h, self.lm_head(h), aux, load

    def training_losses(self, window):
        """window [B, T+2] tokens. Returns dict of losses/metrics and per-router loads."""
        inp = window[:, :-2]
        h, logits, aux, loads = self.forward_main(inp)
        main_ce = F.cross_entropy(logits.float().flatten(0, 1), window[:, 1:-1].flatten())
        _, mtp_logits, mtp_aux, mtp_load = self.forward_mtp(window[:, 1:-1], h, start_pos=1)
        mtp_ce = F.cross_entropy(mtp_logits.float().flatten(0, 1), window[:, 2:].flatten())
        return dict(main_ce=main_ce, mtp_ce=mtp_ce, aux=aux + mtp_aux, loads=loads + [mtp_load],
                    logits=logits, mtp_logits=mtp_logits)


# ----------------------------------------------------------------------------------------------- HF I/O

def to_hf_state_dict(model: TinyDeepseekV3) -> dict[str, torch.Tensor]:
    cfg = model.cfg
    I = cfg.moe_intermediate_size
    out = {}
    for name, t in model.state_dict().items():
        t = t.detach().cpu()
        if name.endswith(".mlp.experts_gate_up"):
            base = name[: -len("experts_gate_up")]
            for e in range(t.shape[0]):
                out[f"{base}experts.{e}.gate_proj.weight"] = t[e, :I].clone()
                out[f"{base}experts.{e}.up_proj.weight"] = t[e, I:].clone()
        elif name.endswith(".mlp.experts_down"):
            base = name[: -len("experts_down")]
            for e in range(t.shape[0]):
                out[f"{base}experts.{e}.down_proj.weight"] = t[e].clone()
        else:
            out[name] = t
    for k in list(out):
        out[k] = out[k].float() if k.endswith("e_score_correction_bias") else out[k].to(torch.bfloat16)
    return out


def from_hf_state_dict(model: TinyDeepseekV3, sd: dict[str, torch.Tensor]):
    cfg = model.cfg
    E = cfg.n_routed_experts
    own = {}
    for name, p in model.state_dict().items():
        if name.endswith(".mlp.experts_gate_up"):
            base = name[: -len("experts_gate_up")]
            own[name] = torch.stack([torch.cat([sd[f"{base}experts.{e}.gate_proj.weight"],
                                                sd[f"{base}experts.{e}.up_proj.weight"]]) for e in range(E)])
        elif name.endswith(".mlp.experts_down"):
            base = name[: -len("experts_down")]
            own[name] = torch.stack([sd[f"{base}experts.{e}.down_proj.weight"] for e in range(E)])
        else:
            own[name] = sd[name]
    model.load_state_dict({k: v.to(model.state_dict()[k].dtype) for k, v in own.items()}, strict=True)


def load_safetensors_dir(path: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return load_file(single)
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    sd = {}
    for fn in files:
        sd.update(load_file(os.path.join(path, fn)))
    return sd


def load_hf_dir(path: str, dtype=torch.float32, device="cpu") -> TinyDeepseekV3:
    with open(os.path.join(path, "config.json")) as f:
        cfg = Config.from_dict(json.load(f))
    model = TinyDeepseekV3(cfg)
    from_hf_state_dict(model, load_safetensors_dir(path))
    model = model.to(device)
    for n, p in model.named_parameters():
        p.data = p.data.to(dtype)
    return model.eval()


def export_hf(model: TinyDeepseekV3, out_dir: str, tokenizer_dir: str | None, max_shard_bytes: int = 0,
              extra_card: dict | None = None):
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    sd = to_hf_state_dict(model)
    meta = {"format": "pt"}
    total = sum(t.numel() * t.element_size() for t in sd.values())
    if not max_shard_bytes or total <= max_shard_bytes:
        save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata=meta)
    else:
        shards, cur, size = [], {}, 0
        for k, t in sd.items():
            b = t.numel() * t.element_size()
            if cur and size + b > max_shard_bytes:
                shards.append(cur)
                cur, size = {}, 0
            cur[k] = t
            size += b
        shards.append(cur)
        wmap = {}
        for i, s in enumerate(shards):
            fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            save_file(s, os.path.join(out_dir, fn), metadata=meta)
            wmap.update({k: fn for k in s})
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.cfg.hf_config(), f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": model.cfg.bos_token_id, "eos_token_id": model.cfg.eos_token_id,
                   "do_sample": False}, f, indent=2)
    if tokenizer_dir:
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tokenizer_dir, fn), os.path.join(out_dir, fn))
    if extra_card:
        with open(os.path.join(out_dir, "train_summary.json"), "w") as f:
            json.dump(extra_card, f, indent=2)


def consolidate(path: str):
    """Merge sharded safetensors in `path` into a single model.safetensors (bf16, bias fp32)."""
    from safetensors.torch import save_file
    idx = os.path.join(path, "model.safetensors.index.json")
    if not os.path.exists(idx):
        print("already a single model.safetensors")
        return
    sd = load_safetensors_dir(path)
    with open(idx) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    for fn in files + ["model.safetensors.index.json"]:
        os.remove(os.path.join(path, fn))
    print(f"wrote {path}/model.safetensors ({len(sd)} tensors)")


# ----------------------------------------------------------------------------------------------- training

def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    prog = min(1.0, (step - args.warmup) / max(1, args.max_steps - args.warmup))
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * prog))


def get_batch(data: torch.Tensor, step: int, args, device):
    """Deterministic in (seed, step): resuming at step s draws the same batches as an uninterrupted run."""
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    starts = torch.randint(0, data.numel() - args.seq_len - 2, (args.batch_size,), generator=g)
    idx = starts.to(device)[:, None] + torch.arange(args.seq_len + 2, device=device)[None, :]
    return data[idx].long()


@torch.no_grad()
def evaluate(model, val: torch.Tensor, args, device, n_windows: int):
    model.eval()
    W = args.seq_len + 2
    n = min(n_windows, (val.numel() - 1) // W)
    tot = {"main_ce": 0.0, "mtp_ce": 0.0, "mtp_acc": 0.0, "mtp_agree_main": 0.0}
    bs = max(1, min(args.batch_size, 32))
    for i in range(0, n, bs):
        j = min(n, i + bs)
        win = torch.stack([val[k * W:(k + 1) * W] for k in range(i, j)]).long().to(device)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            r = model.training_losses(win)
        w = (j - i) / n
        tot["main_ce"] += r["main_ce"].item() * w
        tot["mtp_ce"] += r["mtp_ce"].item() * w
        mtp_pred = r["mtp_logits"].argmax(-1)
        tot["mtp_acc"] += (mtp_pred == win[:, 2:]).float().mean().item() * w
        # teacher-forced proxy for greedy acceptance: MTP draft at i vs the main model's argmax at i+1
        tot["mtp_agree_main"] += (mtp_pred[:, :-1] == r["logits"].argmax(-1)[:, 1:]).float().mean().item() * w
    model.train()
    tot["tokens"] = n * args.seq_len
    return tot


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--consolidate", metavar="DIR", help="merge safetensors shards in DIR and exit")
    ap.add_argument("--data", default=".data")
    ap.add_argument("--out", default="out/tiny-dsv3-mtp")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-steps", type=int, default=3000)
    ap.add_argument("--time-budget", type=float, default=0, help="stop training after this many seconds")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr", type=float, default=2e-4)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--mtp-weight", type=float, default=0.3, help="lambda of the MTP cross-entropy")
    ap.add_argument("--aux-weight", type=float, default=1e-4, help="sequence-wise balance loss weight")
    ap.add_argument("--bias-update", type=float, default=1e-3, help="aux-loss-free balancing step u")
    ap.add_argument("--routed-scaling-factor", type=float, default=2.5)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-windows", type=int, default=128)
    ap.add_argument("--save-every", type=int, default=0, help="write a resumable checkpoint every N steps")
    ap.add_argument("--ckpt", default="", help="checkpoint path (default OUT/ckpt.pt)")
    ap.add_argument("--resume", default="", help="resume from this checkpoint")
    ap.add_argument("--tokenizer-dir", default=None, help="tokenizer files to copy (default DATA/tokenizer; '' = none)")
    ap.add_argument("--max-shard-mb", type=float, default=0, help="shard model.safetensors (for transport)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if args.consolidate:
        consolidate(args.consolidate)
        return

    t_start = time.time()
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    with open(os.path.join(args.data, "meta.json")) as f:
        meta = json.load(f)
    cfg = Config(vocab_size=meta["vocab_size"], routed_scaling_factor=args.routed_scaling_factor,
                 bos_token_id=meta["bos_token_id"], eos_token_id=meta["eos_token_id"])
    data = torch.from_numpy(np.fromfile(os.path.join(args.data, "train.bin"), dtype=np.uint16).astype(np.int32))
    val = torch.from_numpy(np.fromfile(os.path.join(args.data, "val.bin"), dtype=np.uint16).astype(np.int32))
    data = data.to(device)
    print(f"train tokens {data.numel() / 1e6:.2f}M, val tokens {val.numel() / 1e6:.2f}M, device {device}"
          + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda" else ""), flush=True)

    model = TinyDeepseekV3(cfg)
    model.init_weights(args.seed)
    model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in model.mtp.parameters())
    print(f"params {n_params / 1e6:.2f}M (MTP layer {n_mtp / 1e6:.2f}M)", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed_tokens" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed_tokens" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")
    step = 0
    ckpt_path = args.ckpt or os.path.join(args.out, "ckpt.pt")
    if args.resume:
        ck = torch.load(args.resume, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step = ck["step"]
        print(f"resumed from {args.resume} at step {step}", flush=True)

    loss_fn = model.training_losses
    if args.compile:
        loss_fn = torch.compile(model.training_losses)
    routers = model.moe_routers()

    def save_ckpt():
        os.makedirs(os.path.dirname(ckpt_path) or ".", exist_ok=True)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "args": vars(args)},
                   ckpt_path)
        print(f"saved checkpoint {ckpt_path} at step {step}", flush=True)

    model.train()
    t_train = time.time()
    t_log, tok_log = time.time(), 0
    stopped_by = "max_steps"
    hist = []
    while step < args.max_steps:
        if args.time_budget and time.time() - t_train > args.time_budget:
            stopped_by = "time_budget"
            break
        lr = lr_at(step, args)
        for gr in opt.param_groups:
            gr["lr"] = lr
        win = get_batch(data, step, args, device)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            r = loss_fn(win)
        loss = r["main_ce"] + args.mtp_weight * r["mtp_ce"] + args.aux_weight * r["aux"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        with torch.no_grad():  # aux-loss-free balancing: push bias up for underloaded experts, down for overloaded
            for router, load in zip(routers, r["loads"]):
                router.e_score_correction_bias.add_(args.bias_update * torch.sign(load.mean() - load))
        step += 1
        tok_log += win.shape[0] * args.seq_len
        if step % args.log_every == 0 or step == 1:
            loads = torch.stack(r["loads"])
            imb = (loads.max(1).values / loads.mean(1)).mean().item()
            el = time.time() - t_log
            rec = dict(step=step, loss=loss.item(), main_ce=r["main_ce"].item(), mtp_ce=r["mtp_ce"].item(),
                       lr=lr, gnorm=gnorm.item(), max_load_ratio=imb, tok_s=tok_log / el,
                       elapsed=time.time() - t_train)
            hist.append(rec)
            print(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in rec.items()),
                  flush=True)
            t_log, tok_log = time.time(), 0
        if args.eval_every and step % args.eval_every == 0:
            ev = evaluate(model, val, args, device, min(32, args.eval_windows))
            print(f"[eval step {step}] " + " ".join(f"{k} {v:.4f}" for k, v in ev.items()), flush=True)
        if args.save_every and step % args.save_every == 0:
            save_ckpt()
    train_s = time.time() - t_train
    print(f"training stopped by {stopped_by} at step {step} after {train_s:.0f}s", flush=True)
    if device.type == "cuda":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)

    ev = evaluate(model, val, args, device, args.eval_windows)
    print(f"[final held-out] " + " ".join(f"{k} {v:.4f}" for k, v in ev.items()), flush=True)
    bias = torch.stack([r_.e_score_correction_bias for r_ in routers])
    print(f"e_score_correction_bias range [{bias.min().item():.4f}, {bias.max().item():.4f}]", flush=True)
    summary = {"steps": step, "train_seconds": train_s, "stopped_by": stopped_by, "held_out": ev,
               "tokens_seen": step * args.batch_size * args.seq_len, "params": n_params, "args": vars(args),
               "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "log": hist}
    tok_dir = os.path.join(args.data, "tokenizer") if args.tokenizer_dir is None else args.tokenizer_dir
    export_hf(model, args.out, tok_dir,
              int(args.max_shard_mb * 2**20), extra_card=summary)
    if args.save_every:
        save_ckpt()
    print(f"wrote {args.out} (total {time.time() - t_start:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
