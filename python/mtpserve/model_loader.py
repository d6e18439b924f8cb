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
               with_mtp: bool = True) -> LoadedModel:
    config = load_config(model_dir)
    torch_dtype = resolve_dtype(dtype, config)
    num_layers = config.num_hidden_layers
    wanted = num_layers + (config.num_nextn_predict_layers if with_mtp else 0)

    def keep(name: str) -> bool:
        match = _LAYER.match(name)
        return match is None or int(match.group(1)) < wanted

    weights = load_weights(model_dir, torch_dtype, device, keep)
    target = _C.DeepSeekV3(config.cpp, weights)
    mtp = [_C.MtpLayer(config.cpp, weights, layer, target) for layer in range(num_layers, wanted)]
    return LoadedModel(config, target, mtp, torch_dtype, torch.device(device))
