"""Reads an HF DeepSeek-V3 config.json into the runtime's ModelConfig, refusing what it can't run."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mtpserve import _C

# Keys without which the architecture is undefined.
_REQUIRED = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
)
# Keys with the defaults transformers' DeepseekV3Config gives them.
_DEFAULTS = {
    "num_nextn_predict_layers": 0, "q_lora_rank": None, "moe_intermediate_size": 0, "n_routed_experts": 0,
    "n_shared_experts": 0, "num_experts_per_tok": 0, "first_k_dense_replace": 0, "moe_layer_freq": 1,
    "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
    "norm_topk_prob": True, "routed_scaling_factor": 1.0, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "max_position_embeddings": 4096, "tie_word_embeddings": False, "hidden_act": "silu",
    "rope_interleave": True, "attention_bias": False, "bos_token_id": None, "eos_token_id": None,
}
_SUPPORTED = {
    "topk_method": {"noaux_tc"},
    "scoring_func": {"sigmoid"},
    "hidden_act": {"silu"},
    "rope_interleave": {True},
    "attention_bias": {False},
}
_INT_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_nextn_predict_layers", "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
    "v_head_dim", "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "first_k_dense_replace",
    "moe_layer_freq", "n_group", "topk_group", "max_position_embeddings",
)


class ConfigError(ValueError):
    """config.json describes something mtpserve cannot run."""


@dataclass
class ModelConfig:
    """Everything the runtime needs from config.json; `cpp` is the C++ runtime's view of it."""

    cpp: _C.ModelConfig
    bos_token_id: int | None
    eos_token_ids: list[int]
    torch_dtype: str | None
    raw: dict = field(repr=False)

    def __getattr__(self, name):
        return getattr(self.cpp, name)


def load_config(model_dir: str | Path) -> ModelConfig:
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise ConfigError(f"{path} not found: a model directory needs an HF config.json")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not valid JSON: {e}") from e
    return parse_config(raw, source=str(path))


def parse_config(raw: dict, source: str = "config.json") -> ModelConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a JSON object, got a JSON {type(raw).__name__}")
    missing = [k for k in _REQUIRED if raw.get(k) is None]
    if missing:
        raise ConfigError(f"{source}: missing required key(s) {', '.join(missing)}")
    values = {**_DEFAULTS, **{k: v for k, v in raw.items() if v is not None or k == "q_lora_rank"}}
    for key, allowed in _SUPPORTED.items():
        if values[key] not in allowed:
            raise ConfigError(f"{source}: unsupported {key}={values[key]!r} (supported: {sorted(allowed)})")
    for key in _INT_FIELDS:
        if not isinstance(values[key], int) or isinstance(values[key], bool) or values[key] < 0:
            raise ConfigError(f"{source}: {key} must be a non-negative integer, got {values[key]!r}")

    cfg = _C.ModelConfig()
    for key in _INT_FIELDS:
        setattr(cfg, key, values[key])
    cfg.q_lora_rank = _q_lora_rank(values["q_lora_rank"], source)
    cfg.norm_topk_prob = bool(values["norm_topk_prob"])
    cfg.tie_word_embeddings = bool(values["tie_word_embeddings"])
    cfg.routed_scaling_factor = float(values["routed_scaling_factor"])
    cfg.rms_norm_eps = float(values["rms_norm_eps"])
    _set_rope(cfg, values, source)
    _check_moe(cfg, source)
    return ModelConfig(
        cpp=cfg,
        bos_token_id=values["bos_token_id"],
        eos_token_ids=_as_list(values["eos_token_id"]),
        torch_dtype=raw.get("torch_dtype") or raw.get("dtype"),
        raw=raw,
    )


def _q_lora_rank(value, source: str) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{source}: q_lora_rank must be null or a positive integer, got {value!r}")
    return value


def _set_rope(cfg: _C.ModelConfig, values: dict, source: str) -> None:
    # transformers 5 nests everything under rope_parameters; older configs use rope_scaling + rope_theta.
    for key in ("rope_parameters", "rope_scaling"):
        if values.get(key) is not None and not isinstance(values[key], dict):
            raise ConfigError(f"{source}: {key} must be a JSON object or null, got a JSON "
                              f"{type(values[key]).__name__}")
    params = dict(values.get("rope_parameters") or values.get("rope_scaling") or {})
    cfg.rope_theta = float(params.get("rope_theta", values["rope_theta"]))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ("default", "yarn"):
        raise ConfigError(f"{source}: unsupported rope type {kind!r} (supported: 'default', 'yarn')")
    scaling = _C.RopeScaling()
    scaling.type = kind
    if kind == "yarn":
        original = params.get("original_max_position_embeddings", values["max_position_embeddings"])
        factor = params.get("factor") or values["max_position_embeddings"] / original
        if factor < 1:
            raise ConfigError(f"{source}: rope scaling factor must be >= 1, got {factor!r}")
        scaling.factor = float(factor)
        scaling.original_max_position_embeddings = int(original)
        scaling.beta_fast = float(params.get("beta_fast") or 32)
        scaling.beta_slow = float(params.get("beta_slow") or 1)
        scaling.mscale = float(params.get("mscale") or 0)
        scaling.mscale_all_dim = float(params.get("mscale_all_dim") or 0)
    cfg.rope_scaling = scaling


def _check_moe(cfg: _C.ModelConfig, source: str) -> None:
    if cfg.n_routed_experts == 0:
        return
    if cfg.moe_intermediate_size == 0 or cfg.num_experts_per_tok == 0:
        raise ConfigError(f"{source}: MoE models need moe_intermediate_size and num_experts_per_tok")
    if cfg.n_group == 0 or cfg.n_routed_experts % cfg.n_group:
        raise ConfigError(f"{source}: n_routed_experts={cfg.n_routed_experts} is not divisible by n_group={cfg.n_group}")
    per_group = cfg.n_routed_experts // cfg.n_group
    if per_group < 2:
        raise ConfigError(f"{source}: n_group={cfg.n_group} leaves fewer than 2 experts per group")
    if not 1 <= cfg.topk_group <= cfg.n_group:
        raise ConfigError(f"{source}: topk_group={cfg.topk_group} must be between 1 and n_group={cfg.n_group}")
    if cfg.num_experts_per_tok > cfg.topk_group * per_group:
        raise ConfigError(
            f"{source}: num_experts_per_tok={cfg.num_experts_per_tok} exceeds the {cfg.topk_group * per_group} "
            "experts in the kept groups")
    if cfg.moe_layer_freq == 0:
        raise ConfigError(f"{source}: moe_layer_freq must be >= 1")


def _as_list(value) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]
