"""Loads HF safetensors checkpoints (single file or sharded), dequantizing FP8 block weights. Under tensor
parallelism a rank reads only its slice of each split tensor; routed experts arrive stacked per layer."""
from __future__ import annotations

import json
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError, safe_open
from tqdm import tqdm

from mtpserve import _C, fp8
from mtpserve.expert_stacks import ExpertStacks

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
                 keep: Callable[[str], bool] = lambda name: True, tp_rank: int = 0,
                 tp_size: int = 1, ep_rank: int = 0, ep_size: int = 1) -> dict[str, torch.Tensor]:
    """All tensors whose name passes `keep`, in `dtype` (router biases stay float32), on `device`: of a tensor
    that tensor parallelism splits (_C.tensor_parallel_dim), rank tp_rank's 1/tp_size slice only; the routed
    experts of each MoE layer as its two stacks (ExpertStacks) instead of per-expert tensors. Under expert
    parallelism (ep_size > 1) the routed experts are not sliced: the rank reads its 1/ep_size of them, whole."""
    expert_parallel = ep_size > 1
    locations = tensor_locations(model_dir)
    wanted = [n for n in sorted(locations) if not n.endswith(fp8.SCALE_SUFFIX) and keep(n)]
    experts = ExpertStacks(wanted, ep_rank, ep_size) if expert_parallel else ExpertStacks(wanted)
    wanted = [n for n in wanted if experts.wanted(n)]
    by_shard: dict[Path, list[str]] = defaultdict(list)
    for name in wanted:
        by_shard[locations[name]].append(name)
    out: dict[str, torch.Tensor] = {}
    with ExitStack() as files, tqdm(total=len(wanted), desc=f"Loading {Path(model_dir).name}", unit="tensor") as bar:
        opened = {path: files.enter_context(_open(path)) for path in set(locations.values())}
        for shard, names in by_shard.items():
            for name in names:
                whole = expert_parallel and experts.routed(name)
                tensor = _read_rank_slice(opened, locations, name, tp_rank, 1 if whole else tp_size)
                tensor = tensor.to(device=device, dtype=torch.float32 if name.endswith("_bias") else dtype)
                if not experts.place(name, tensor):
                    out[name] = tensor
                bar.update()
    return out | experts.finished()


def _read_rank_slice(opened: dict, locations: dict[str, Path], name: str, rank: int, size: int) -> torch.Tensor:
    """The tensor, or only rank's slice of it when tensor parallelism splits it (FP8 ones are read whole to
    dequantize their scale blocks, then sliced). A size that does not divide is read whole: the model then
    names the dimension."""
    path = locations[name]
    dim = _C.tensor_parallel_dim(name) if size > 1 else None
    if dim is None:
        return _dequantized(_read(opened[path], name, path), name, locations, opened)
    rows = _open_slice(opened[path], name, path)
    full = rows.get_shape()[dim]
    if full % size:
        return _dequantized(_read(opened[path], name, path), name, locations, opened)
    part = full // size
    if rows.get_dtype().startswith("F8"):
        whole = _dequantized(_read(opened[path], name, path), name, locations, opened)
        return whole.narrow(dim, rank * part, part).contiguous()
    span = slice(rank * part, (rank + 1) * part)
    return rows[span] if dim == 0 else rows[:, span]


def _dequantized(tensor: torch.Tensor, name: str, locations: dict[str, Path], opened: dict) -> torch.Tensor:
    return fp8.dequantize(name, tensor, _scale_for(name, locations, opened)) if fp8.is_fp8(tensor) else tensor


def _open(path: Path):
    try:
        return safe_open(str(path), framework="pt", device="cpu")
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {path}: {e}") from e


def _open_slice(f, name: str, path: Path):
    try:
        return f.get_slice(name)
    except SafetensorError as e:
        raise CheckpointError(f"cannot read tensor '{name}' from {path}: {e}") from e


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
