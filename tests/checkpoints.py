"""Random tiny DeepSeek-V3 checkpoints in DeepSeek's on-disk naming, with an MTP layer, built from
transformers' own DeepseekV3ForCausalLM so that transformers can serve as the numerical reference."""
from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

BASE = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
    num_attention_heads=4, q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
    v_head_dim=16, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=1, topk_group=1,
    first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, max_position_embeddings=512,
    rope_theta=10000.0, num_nextn_predict_layers=1, initializer_range=0.1, bos_token_id=0, eos_token_id=1,
    tie_word_embeddings=False,
)


def hf_config(**overrides) -> DeepseekV3Config:
    values = {**BASE, **overrides}
    values["num_key_value_heads"] = values["num_attention_heads"]
    rope = values.pop("rope_scaling", None)
    config = DeepseekV3Config(**values, rope_parameters={"rope_type": "default", "rope_theta": values["rope_theta"],
                                                         **(rope or {})})
    config._attn_implementation = "eager"
    return config


def random_model(config: DeepseekV3Config, seed: int) -> DeepseekV3ForCausalLM:
    torch.manual_seed(seed)
    model = DeepseekV3ForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # ones would hide a mixed-up norm
                p.copy_(1 + 0.2 * torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # zero by default: randomise it
                b.copy_(0.1 * torch.randn_like(b))
    return model


def deepseek_state_dict(model: DeepseekV3ForCausalLM, layer_offset: int = 0) -> dict[str, torch.Tensor]:
    """transformers' fused expert tensors split back into DeepSeek's per-expert names."""
    out = {}
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    for name, t in state.items():
        t = t.detach().contiguous()
        if layer_offset:
            name = re.sub(r"model\.layers\.(\d+)\.", lambda m: f"model.layers.{int(m.group(1)) + layer_offset}.", name)
        if name.endswith("rotary_emb.inv_freq") or name.endswith("rotary_emb.original_inv_freq"):
            continue
        if name.endswith("mlp.experts.gate_up_proj"):
            prefix, inter = name[: -len("gate_up_proj")], t.shape[1] // 2
            for e in range(t.shape[0]):
                out[f"{prefix}{e}.gate_proj.weight"] = t[e, :inter].contiguous()
                out[f"{prefix}{e}.up_proj.weight"] = t[e, inter:].contiguous()
        elif name.endswith("mlp.experts.down_proj"):
            prefix = name[: -len("down_proj")]
            for e in range(t.shape[0]):
                out[f"{prefix}{e}.down_proj.weight"] = t[e].contiguous()
        else:
            out[name] = t
    return out


def mtp_state_dict(overrides: dict, main: DeepseekV3ForCausalLM, seed: int) -> dict[str, torch.Tensor]:
    """An MTP module at index num_hidden_layers: a random MoE decoder block plus its projections."""
    config = main.config
    layers = config.num_hidden_layers
    block_cfg = hf_config(**{**overrides, "num_hidden_layers": 1, "first_k_dense_replace": 0})
    block = random_model(block_cfg, seed + 1)
    out = {k: v for k, v in deepseek_state_dict(block, layer_offset=layers).items()
           if k.startswith(f"model.layers.{layers}.")}
    g = torch.Generator().manual_seed(seed + 2)
    h = config.hidden_size
    p = f"model.layers.{layers}."
    out[p + "enorm.weight"] = 1 + 0.2 * torch.randn(h, generator=g)
    out[p + "hnorm.weight"] = 1 + 0.2 * torch.randn(h, generator=g)
    out[p + "eh_proj.weight"] = 0.1 * torch.randn(h, 2 * h, generator=g)
    out[p + "shared_head.norm.weight"] = 1 + 0.2 * torch.randn(h, generator=g)
    out[p + "shared_head.head.weight"] = main.lm_head.weight.detach().clone()
    out[p + "embed_tokens.weight"] = main.model.embed_tokens.weight.detach().clone()
    return out


def write_checkpoint(path: Path, seed: int = 0, shards: int = 1, **overrides) -> dict[str, torch.Tensor]:
    """Writes config.json + safetensors (sharded with an index when shards > 1); returns the tensors."""
    path.mkdir(parents=True, exist_ok=True)
    config = hf_config(**overrides)
    main = random_model(config, seed)
    tensors = {**deepseek_state_dict(main), **mtp_state_dict(overrides, main, seed)}
    write_tensors(path, tensors, shards)
    config.save_pretrained(path)
    return tensors


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], shards: int = 1) -> None:
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(path / "model.safetensors"))
        return
    weight_map = {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i::shards]
        save_file({n: tensors[n] for n in part}, str(path / file))
        weight_map.update({n: file for n in part})
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def load_reference(path: Path):
    """transformers' target model and MTP model for a checkpoint written above (float32)."""
    from transformers.modeling_layers import MtpModel

    config = DeepseekV3Config.from_pretrained(path)
    layers = config.num_hidden_layers
    # transformers only looks for MTP weights under layer 61 (the real model's index).
    DeepseekV3ForCausalLM._keys_to_ignore_on_load_unexpected = [rf"model\.layers\.{layers}\..*"]
    model = DeepseekV3ForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()
    mtp = MtpModel.from_pretrained(model).float().eval()
    return model, mtp
