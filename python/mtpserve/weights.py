"""Loads HF safetensors checkpoints (single file or sharded), dequantizing FP8 block weights."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError, safe_open
from tqdm import tqdm

from mtpserve import fp8

INDEX_FILE = "model.safetensors.index.json"


class CheckpointError(ValueError):
    """The checkpoint files are missing, unreadable or inconsistent."""


def checkpoint_files(model_dir: str | Path) -> dict[Path, list[str] | None]:
    """Shard path -> tensor names to read from it (None: every tensor in the file)."""
    model_dir = Path(model_dir)
    index = model_dir / INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index} has no 'weight_map'")
        shards: dict[Path, list[str]] = defaultdict(list)
        for name, shard in weight_map.items():
            shards[model_dir / shard].append(name)
        for shard in shards:
            if not shard.is_file():
                raise CheckpointError(f"shard {shard.name} listed in {INDEX_FILE} is missing from {model_dir}")
        return dict(shards)
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors files in {model_dir}")
    return {f: None for f in files}


def load_weights(model_dir: str | Path, dtype: torch.dtype, device: str | torch.device = "cpu",
                 keep: Callable[[str], bool] = lambda name: True) -> dict[str, torch.Tensor]:
    """All tensors whose name passes `keep`, in `dtype` (router biases stay float32), on `device`."""
    shards = checkpoint_files(model_dir)
    out: dict[str, torch.Tensor] = {}
    with tqdm(desc=f"Loading {Path(model_dir).name}", unit="tensor", leave=False) as progress:
        for shard, names in shards.items():
            for name, tensor in _read_shard(shard, names, keep):
                out[name] = tensor.to(device=device, dtype=torch.float32 if name.endswith("_bias") else dtype)
                progress.update()
    return out


def _read_shard(path: Path, names: list[str] | None, keep: Callable[[str], bool]):
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            available = set(f.keys())
            for name in sorted(names if names is not None else available):
                if name.endswith(fp8.SCALE_SUFFIX) or not keep(name):
                    continue
                if name not in available:
                    raise CheckpointError(f"tensor '{name}' is listed in {INDEX_FILE} but not in {path.name}")
                tensor = f.get_tensor(name)
                if fp8.is_fp8(tensor):
                    tensor = fp8.dequantize(name, tensor, _scale_for(f, available, name, path))
                yield name, tensor
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {path}: {e}") from e


def _scale_for(f, available: set[str], name: str, path: Path) -> torch.Tensor:
    scale_name = name + fp8.SCALE_SUFFIX
    if scale_name not in available:
        raise CheckpointError(f"FP8 tensor '{name}' in {path.name} has no '{scale_name}'")
    return f.get_tensor(scale_name)
