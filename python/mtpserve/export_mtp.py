"""Exports a DeepSeek-V3 checkpoint's MTP layer as a standalone draft-model directory.

The MTP module is `model.layers.{N}` with N = num_hidden_layers. The export streams it tensor by
tensor from only the shards that hold it (plus, where the layer has no copy of its own, the shards
holding the target's embedding and LM head), dequantizes FP8 block weights to bf16 and writes one
`model.safetensors` without ever holding more than one tensor in memory. Tensor names stay DeepSeek's
(`model.layers.{N}.…`, same N) so the runtime loads a draft directory with the same code as the MTP
layer of a full checkpoint; config.json marks the directory with `"mtp_draft": true`.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from mtpserve import fp8
from mtpserve.config import load_config
from mtpserve.weights import INDEX_FILE, _open, _read, check_shard, tensor_locations

OUTPUT_FILE = "model.safetensors"
DRAFT_ARCHITECTURE = "DeepseekV3MTPModel"
# Files copied verbatim when present (besides these globs: tokenizer*, special_tokens*).
_COPIED = ("generation_config.json", "chat_template.json", "chat_template.jinja")
_COPIED_GLOBS = ("tokenizer*", "special_tokens*")
# Tensors without which a directory is no MTP layer (relative to model.layers.{N}.).
_REQUIRED = ("enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight",
             "input_layernorm.weight", "post_attention_layernorm.weight")
# safetensors dtype names.
_ST_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2", torch.int64: "I64", torch.int32: "I32",
    torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}
_FROM_ST = {v: k for k, v in _ST_DTYPES.items()}
_FLOAT_ST = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}


class ExportError(ValueError):
    """The checkpoint cannot be exported as an MTP draft (or the output directory is unusable)."""


@dataclass
class ExportResult:
    output_dir: Path
    layer: int                                    # N: the MTP layer's index, kept in the tensor names
    tensors: list[str]                            # output tensor names
    total_size: int                               # bytes of tensor data written
    shards_read: list[str]                        # input files opened (relative names)
    copied_from_target: list[str] = field(default_factory=list)  # e.g. embed_tokens from model.embed_tokens
    copied_files: list[str] = field(default_factory=list)        # tokenizer & co.


@dataclass
class _Entry:
    name: str            # output name
    source: str          # input name
    shard: Path
    dtype: torch.dtype   # output dtype
    shape: list[int]
    fp8: bool


def export_mtp(input_dir: str | Path, output_dir: str | Path, force: bool = False,
               progress: bool = True) -> ExportResult:
    """Writes the MTP draft directory for the checkpoint in `input_dir`; raises ExportError (a
    ValueError) or weights.CheckpointError / config.ConfigError when it cannot."""
    input_dir, output_dir = Path(input_dir), Path(output_dir)
    if not input_dir.is_dir():
        raise ExportError(f"input directory {input_dir} does not exist")
    config = load_config(input_dir)
    raw = config.raw
    if not raw.get("num_nextn_predict_layers"):
        value = "missing" if "num_nextn_predict_layers" not in raw else raw["num_nextn_predict_layers"]
        raise ExportError(f"{input_dir} has no MTP layer (num_nextn_predict_layers is {value}): nothing to export")
    layer = config.num_hidden_layers
    _check_output_dir(input_dir, output_dir, force)

    # A user may have fetched only the shards holding layer N: check just the ones read.
    locations = tensor_locations(input_dir, require_all_shards=False)
    prefix = f"model.layers.{layer}."
    sources = {n: n for n in sorted(locations) if n.startswith(prefix) and not n.endswith(fp8.SCALE_SUFFIX)}
    if not sources:
        raise ExportError(f"{input_dir} has no tensors for the MTP layer {prefix}* "
                          f"(num_hidden_layers={layer}, num_nextn_predict_layers={raw['num_nextn_predict_layers']})")
    missing = [prefix + r for r in _REQUIRED if prefix + r not in sources]
    if missing:
        raise ExportError(f"the MTP layer in {input_dir} is incomplete: missing {', '.join(missing)}")
    copied_from_target = []
    for own, target in (("embed_tokens.weight", ["model.embed_tokens.weight"]),
                        ("shared_head.head.weight",
                         ["lm_head.weight"] + (["model.embed_tokens.weight"] if config.tie_word_embeddings else []))):
        if prefix + own in sources:
            continue
        found = next((t for t in target if t in locations), None)
        if found is None:
            raise ExportError(f"{input_dir} has neither {prefix + own} nor the target's {target[0]} to copy")
        sources[prefix + own] = found
        copied_from_target.append(f"{prefix + own} <- {found}")

    with ExitStack() as stack:
        opened: dict[Path, object] = {}

        def shard(path: Path):
            if path not in opened:
                check_shard(path)
                opened[path] = stack.enter_context(_open(path))
            return opened[path]

        entries = [_plan(name, src, locations, shard) for name, src in sorted(sources.items())]
        output_dir.mkdir(parents=True, exist_ok=True)
        tmp = output_dir / (OUTPUT_FILE + ".partial")
        try:
            total = _write_safetensors(tmp, entries, locations, shard, progress, input_dir.name)
            os.replace(tmp, output_dir / OUTPUT_FILE)
        finally:
            tmp.unlink(missing_ok=True)
        shards_read = sorted(str(p.relative_to(input_dir)) for p in opened)

    index = {"metadata": {"total_size": total}, "weight_map": {e.name: OUTPUT_FILE for e in entries}}
    (output_dir / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    (output_dir / "config.json").write_text(json.dumps(draft_config(raw), indent=2) + "\n")
    copied = _copy_tokenizer_files(input_dir, output_dir)
    return ExportResult(output_dir, layer, [e.name for e in entries], total, shards_read, copied_from_target, copied)


def draft_config(raw: dict) -> dict:
    """The draft directory's config.json: the input's, one MTP layer at index num_hidden_layers, bf16."""
    out = {k: v for k, v in raw.items() if k not in ("quantization_config", "auto_map")}
    out["num_nextn_predict_layers"] = 1
    out["architectures"] = [DRAFT_ARCHITECTURE]
    out["mtp_draft"] = True
    out["torch_dtype"] = "bfloat16"
    if "dtype" in out:  # transformers 5 spells it dtype
        out["dtype"] = "bfloat16"
    return out


def _check_output_dir(input_dir: Path, output_dir: Path, force: bool) -> None:
    if output_dir.exists() and not output_dir.is_dir():
        raise ExportError(f"output {output_dir} exists and is not a directory")
    if output_dir.exists() and output_dir.resolve() == input_dir.resolve():
        raise ExportError(f"output directory {output_dir} is the input directory")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not force:
        raise ExportError(f"output directory {output_dir} is not empty (pass --force to write into it)")


def _plan(name: str, source: str, locations: dict[str, Path], shard) -> _Entry:
    """Output dtype and shape from the shard's header, without reading the tensor."""
    path = locations[source]
    f = shard(path)
    try:
        view = f.get_slice(source)
        st_dtype, shape = view.get_dtype(), list(view.get_shape())
    except Exception as e:  # safetensors raises its own error types here
        raise ExportError(f"cannot read tensor '{source}' from {path}: {e}") from e
    is_fp8 = st_dtype.startswith("F8")
    if is_fp8 and source + fp8.SCALE_SUFFIX not in locations:
        raise ExportError(f"FP8 tensor '{source}' has no '{source + fp8.SCALE_SUFFIX}' in the checkpoint")
    if name.endswith("_bias"):  # e_score_correction_bias: the router needs it in fp32
        dtype = torch.float32
    elif st_dtype in _FLOAT_ST:
        dtype = torch.bfloat16
    elif st_dtype in _FROM_ST:
        dtype = _FROM_ST[st_dtype]
    else:
        raise ExportError(f"tensor '{source}' in {path} has unsupported dtype {st_dtype}")
    return _Entry(name, source, path, dtype, shape, is_fp8)


def _write_safetensors(path: Path, entries: list[_Entry], locations: dict[str, Path], shard, progress: bool,
                       label: str) -> int:
    """Writes a safetensors file one tensor at a time: the header is computed from the plan first."""
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for e in entries:
        size = _numel(e.shape) * torch.empty((), dtype=e.dtype).element_size()
        header[e.name] = {"dtype": _ST_DTYPES[e.dtype], "shape": e.shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as out, tqdm(total=len(entries), desc=f"Exporting MTP layer of {label}", unit="tensor",
                                      disable=not progress) as bar:
        out.write(struct.pack("<Q", len(blob)))
        out.write(blob)
        for e in entries:
            tensor = _read(shard(e.shard), e.source, e.shard)
            if e.fp8:
                scale_name = e.source + fp8.SCALE_SUFFIX
                scale = _read(shard(locations[scale_name]), scale_name, locations[scale_name])
                tensor = fp8.dequantize(e.source, tensor, scale)
            tensor = tensor.to(e.dtype).contiguous()
            if list(tensor.shape) != e.shape:  # cannot happen unless the file changes under us
                raise ExportError(f"tensor '{e.source}' has shape {list(tensor.shape)}, header said {e.shape}")
            out.write(tensor.reshape(-1).view(torch.uint8).numpy())
            del tensor
            bar.update()
    return offset


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _copy_tokenizer_files(input_dir: Path, output_dir: Path) -> list[str]:
    files = {p for g in _COPIED_GLOBS for p in input_dir.glob(g)} | {input_dir / n for n in _COPIED}
    copied = []
    for src in sorted(files):
        if src.is_file():
            shutil.copyfile(src, output_dir / src.name)
            copied.append(src.name)
    return copied
