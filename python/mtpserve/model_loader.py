"""Builds the C++ target model (and its MTP layers) from a checkpoint directory."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mtpserve import _C
from mtpserve.config import ConfigError, ModelConfig, load_config
from mtpserve.weights import load_weights

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_LAYER = re.compile(r"model\.layers\.(\d+)\.")


@dataclass
class LoadedModel:
    config: ModelConfig
    target: _C.DeepSeekV3
    mtp_layers: list[_C.MtpLayer] = field(default_factory=list)
    dtype: torch.dtype = torch.float32
    device: torch.device = torch.device("cpu")
    tp: _C.TensorParallel = field(default_factory=_C.TensorParallel)

    def allocate_caches(self, num_blocks: int, block_size: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Zeroed latent caches [num_blocks, block_size, kv_lora_rank + rope_dim]: target layers, MTP layers."""
        def make(n: int) -> list[torch.Tensor]:
            shape = (num_blocks, block_size, self.config.cache_dim)
            return [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(n)]
        return make(self.config.num_hidden_layers), make(len(self.mtp_layers))


def resolve_dtype(dtype: str | torch.dtype, config: ModelConfig) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        # FP8 checkpoints are dequantized; everything else keeps its stored precision.
        quantized = "quantization_config" in config.raw
        return DTYPES.get(config.torch_dtype, torch.float32) if not quantized else torch.bfloat16
    if dtype not in DTYPES:
        raise ConfigError(f"unsupported dtype {dtype!r} (choose auto, {', '.join(DTYPES)})")
    return DTYPES[dtype]


def load_model(model_dir: str | Path, dtype: str | torch.dtype = "auto", device: str = "cpu",
               with_mtp: bool = True, tp: _C.TensorParallel | None = None,
               batch_invariant: bool = False) -> LoadedModel:
    """With a tensor-parallel `tp`, each rank reads only its shards (MLA heads, MLP/expert intermediate
    dims, lm_head vocab rows of its attention group; under expert parallelism its own routed experts, whole)
    and the replicated tensors. With `batch_invariant`
    the layers (and a draft loaded later) run on the batch-invariant kernels."""
    config = load_config(model_dir)
    config.cpp.batch_invariant = batch_invariant
    torch_dtype = resolve_dtype(dtype, config)
    num_layers = config.num_hidden_layers
    wanted = num_layers + (config.num_nextn_predict_layers if with_mtp else 0)

    def keep(name: str) -> bool:
        match = _LAYER.match(name)
        return match is None or int(match.group(1)) < wanted

    tp = tp if tp is not None else _C.TensorParallel()
    weights = load_weights(model_dir, torch_dtype, device, keep, tp_rank=tp.rank, tp_size=tp.size,
                           ep_rank=tp.ep_rank, ep_size=tp.ep_size)
    target = _C.DeepSeekV3(config.cpp, weights, tp)
    mtp = [_C.MtpLayer(config.cpp, weights, layer, target) for layer in range(num_layers, wanted)]
    return LoadedModel(config, target, mtp, torch_dtype, torch.device(device), tp)


# The keys a draft's MTP layer must share with its target model.
_DRAFT_MUST_MATCH = ("hidden_size", "vocab_size", "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim",
                     "qk_rope_head_dim", "v_head_dim", "q_lora_rank", "n_routed_experts", "moe_intermediate_size",
                     "num_hidden_layers")


def load_draft(draft_dir: str | Path, model: LoadedModel) -> None:
    """Replaces model.mtp_layers with the MTP layer of `draft_dir`: an export_deepseek_mtp output or a
    full checkpoint, whose layer num_hidden_layers is the MTP module."""
    draft = load_config(draft_dir)
    for key in _DRAFT_MUST_MATCH:
        if getattr(draft.cpp, key) != getattr(model.config.cpp, key):
            raise ConfigError(f"--draft_model {draft_dir}: {key}={getattr(draft.cpp, key)} does not match the "
                              f"target model's {getattr(model.config.cpp, key)}")
    if draft.num_nextn_predict_layers < 1:
        raise ConfigError(f"--draft_model {draft_dir} has no MTP layer (num_nextn_predict_layers=0)")
    layer = draft.num_hidden_layers
    prefix = f"model.layers.{layer}."
    weights = load_weights(draft_dir, model.dtype, model.device, lambda name: name.startswith(prefix),
                           tp_rank=model.tp.rank, tp_size=model.tp.size, ep_rank=model.tp.ep_rank,
                           ep_size=model.tp.ep_size)
    model.mtp_layers = [_C.MtpLayer(model.config.cpp, weights, layer, model.target)]
