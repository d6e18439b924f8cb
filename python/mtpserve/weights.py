"""Loads HF safetensors checkpoints (single file or sharded), dequantizing FP8 block weights."""
from __future__ import annotations

import json
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError, safe_open
from tqdm import tqdm

from mtpserve import fp8

INDEX_FILE = "model.safetensors.index.json"


class CheckpointError(ValueError):
    """The checkpoint files are missing, unreadable or inconsistent."""


def tensor_locations(model_dir: str | Path, require_all_shards: bool = True) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it. Without require_all_shards, shards listed in the
    index may be absent (for readers that open only some of them, and check those)."""
    model_dir = Path(model_dir)
    index = model_dir / INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index} has no 'weight_map'")
        for shard in set(weight_map.values()) if require_all_shards else ():
            check_shard(model_dir / shard)
        return {name: model_dir / shard for name, shard in weight_map.items()}
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors files in {model_dir}")
    locations = {}
    for file in files:
        with _open(file) as f:
            locations.update({name: file for name in f.keys()})
    return locations


def check_shard(path: Path) -> None:
    if not path.is_file():
        raise CheckpointError(f"shard {path.name} listed in {INDEX_FILE} is missing from {path.parent}")


def load_weights(model_dir: str | Path, dtype: torch.dtype, device: str | torch.device = "cpu",
                 keep: Callable[[str], bool] = lambda name: True) -> dict[str, torch.Tensor]:
    """All tensors whose name passes `keep`, in `dtype` (router biases stay float32), on `device`."""
    locations = tensor_locations(model_dir)
    wanted = [n for n in sorted(locations) if not n.endswith(fp8.SCALE_SUFFIX) and keep(n)]
    by_shard: dict[Path, list[str]] = defaultdict(list)
    for name in wanted:
        by_shard[locations[name]].append(name)
    out: dict[str, torch.Tensor] = {}
    with ExitStack() as files, tqdm(total=len(wanted), desc=f"Loading {Path(model_dir).name}", unit="tensor") as bar:
        opened = {path: files.enter_context(_open(path)) for path in set(locations.values())}
        for shard, names in by_shard.items():
            for name in names:
                tensor = _read(opened[shard], name, shard)
                if fp8.is_fp8(tensor):
                    tensor = fp8.dequantize(name, tensor, _scale_for(name, locations, opened))
                out[name] = tensor.to(device=device, dtype=torch.float32 if name.endswith("_bias") else dtype)
                bar.update()
    return out


def _open(path: Path):
    try:
        return safe_open(str(path), framework="pt", device="cpu")
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {path}: {e}") from e


def _read(f, name: str, path: Path) -> torch.Tensor:
    try:
        return f.get_tensor(name)
    except SafetensorError as e:
        raise CheckpointError(f"cannot read tensor '{name}' from {path}: {e}") from e


def _scale_for(name: str, locations: dict[str, Path], opened: dict) -> torch.Tensor:
    scale_name = name + fp8.SCALE_SUFFIX
    if scale_name not in locations:
        raise CheckpointError(f"FP8 tensor '{name}' has no '{scale_name}' in the checkpoint")
    return _read(opened[locations[scale_name]], scale_name, locations[scale_name])
