"""Checkpoint loading: sharded DeepSeek naming, FP8 block-quantized weights, and the errors a bad
checkpoint gets."""
import json
import re

import pytest
import torch
from safetensors.torch import save_file

from checkpoints import write_checkpoint, write_tensors
from mtpserve.config import ConfigError
from mtpserve.model_loader import load_model
from mtpserve import _C
from mtpserve.weights import CheckpointError, load_weights
from paged import PagedLayout

FP8_MAX = torch.finfo(torch.float8_e4m3fn).max
# Projections that DeepSeek-V3 ships in FP8; embeddings, norms, the router and the head stay bf16.
QUANTIZED = re.compile(r"(self_attn\.(q_a_proj|q_b_proj|q_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj)|"
                       r"(mlp|experts\.\d+|shared_experts)\.(gate_proj|up_proj|down_proj)|eh_proj)\.weight$")


def prefill_logits(path, ids):
    model = load_model(path, dtype="float32")
    caches, _ = model.allocate_caches(16, 8)
    layout = PagedLayout(16, 8)
    layout.add_sequence()
    hidden = model.target.forward(caches, ids, **layout.step({0: len(ids)}))
    return model.target.logits(hidden)


def quantize_blockwise(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = w.shape
    scales = torch.empty((rows + 127) // 128, (cols + 127) // 128)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            block = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            scales[i, j] = block.abs().max() / FP8_MAX
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = (block / scales[i, j]).to(torch.float8_e4m3fn)
    return q, scales


def test_sharded_checkpoint_equals_single_file(tmp_path):
    tensors = write_checkpoint(tmp_path / "single", seed=3, q_lora_rank=24, n_group=2, topk_group=1)
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    write_tensors(sharded, tensors, shards=3)
    (sharded / "config.json").write_text((tmp_path / "single" / "config.json").read_text())
    ids = torch.arange(11) % 100
    assert torch.equal(prefill_logits(tmp_path / "single", ids), prefill_logits(sharded, ids))


def test_fp8_checkpoint_equals_its_exact_dequantization(tmp_path):
    # hidden 160 makes 128-wide blocks with ragged edges.
    overrides = dict(hidden_size=160, q_lora_rank=136, n_group=2, topk_group=1)
    tensors = write_checkpoint(tmp_path / "float", seed=4, **overrides)
    fp8, dequantized = {}, {}
    for name, t in tensors.items():
        if QUANTIZED.search(name):
            q, scale = quantize_blockwise(t)
            fp8[name], fp8[name + "_scale_inv"] = q, scale
            rows, cols = t.shape
            # The exact value each stored weight stands for: its e4m3 value times its block's scale.
            dequantized[name] = q.float() * scale.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
        else:
            fp8[name] = dequantized[name] = t
    for folder, data in (("fp8", fp8), ("exact", dequantized)):
        (tmp_path / folder).mkdir()
        write_tensors(tmp_path / folder, data, shards=2)
        (tmp_path / folder / "config.json").write_text((tmp_path / "float" / "config.json").read_text())
    assert any(t.dtype == torch.float8_e4m3fn for t in fp8.values())
    ids = torch.arange(9) * 7 % 120
    assert torch.equal(prefill_logits(tmp_path / "fp8", ids), prefill_logits(tmp_path / "exact", ids))


@pytest.fixture
def checkpoint(tmp_path):
    write_checkpoint(tmp_path, seed=5, q_lora_rank=24)
    return tmp_path


def edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key)
        else:
            config[key] = value
    (path / "config.json").write_text(json.dumps(config))


def test_missing_config_key_is_named(checkpoint):
    edit_config(checkpoint, kv_lora_rank=None)
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        load_model(checkpoint)


def test_unsupported_scoring_func_is_named(checkpoint):
    edit_config(checkpoint, scoring_func="softmax")
    with pytest.raises(ConfigError, match="scoring_func='softmax'"):
        load_model(checkpoint)


def resave_without(path, drop=None, replace=None):
    from safetensors.torch import load_file
    tensors = load_file(str(path / "model.safetensors"))
    if drop:
        del tensors[drop]
    if replace:
        tensors.update(replace)
    save_file(tensors, str(path / "model.safetensors"))


def test_missing_tensor_is_named(checkpoint):
    resave_without(checkpoint, drop="model.layers.1.self_attn.kv_b_proj.weight")
    with pytest.raises(ValueError, match=r"missing tensor 'model\.layers\.1\.self_attn\.kv_b_proj\.weight'"):
        load_model(checkpoint)


def test_missing_expert_tensor_is_named(checkpoint):
    resave_without(checkpoint, drop="model.layers.2.mlp.experts.5.up_proj.weight")
    with pytest.raises(ValueError, match=r"missing tensor 'model\.layers\.2\.mlp\.experts\.5\.up_proj\.weight'"):
        load_model(checkpoint)


def test_a_rank_reads_only_its_slices_and_experts_come_stacked(checkpoint):
    full = write_checkpoint(checkpoint, seed=4)
    for rank in (0, 1):
        got = load_weights(checkpoint, torch.float32, tp_rank=rank, tp_size=2)
        sliced = 0
        for name, tensor in full.items():
            if ".experts." in name and "shared" not in name:
                continue
            dim = _C.tensor_parallel_dim(name)
            want = tensor.float() if dim is None else tensor.float().chunk(2, dim)[rank]
            assert torch.equal(got[name], want), name
            sliced += dim is not None
        assert sliced > 10  # heads, MLP and shared-expert rows, o_proj/down columns, the head
        for layer in (1, 2):  # the MoE layers: experts stacked, each rank with its half of every expert
            prefix = f"model.layers.{layer}.mlp."
            expert = lambda e, kind: full[f"{prefix}experts.{e}.{kind}.weight"].float()  # noqa: E731
            gate_up = torch.stack([torch.cat([expert(e, "gate_proj").chunk(2, 0)[rank],
                                              expert(e, "up_proj").chunk(2, 0)[rank]]) for e in range(8)])
            down = torch.stack([expert(e, "down_proj").chunk(2, 1)[rank] for e in range(8)])
            assert torch.equal(got[_C.stacked_gate_up(prefix)], gate_up)
            assert torch.equal(got[_C.stacked_down(prefix)], down)
            assert not any(name.startswith(f"{prefix}experts.0.") for name in got)


def test_misshaped_tensor_names_both_shapes(checkpoint):
    resave_without(checkpoint, replace={"model.layers.0.self_attn.o_proj.weight": torch.zeros(64, 60)})
    with pytest.raises(ValueError, match=r"'model\.layers\.0\.self_attn\.o_proj\.weight' has shape \[64, 60\], "
                                         r"expected \[64, 64\]"):
        load_model(checkpoint)


def test_corrupt_safetensors_header_is_reported(checkpoint):
    data = (checkpoint / "model.safetensors").read_bytes()
    (checkpoint / "model.safetensors").write_bytes(b"\xff" * 8 + data[8:])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_model(checkpoint)


def test_missing_shard_is_named(tmp_path):
    tensors = write_checkpoint(tmp_path, seed=6)
    (tmp_path / "model.safetensors").unlink()
    write_tensors(tmp_path, tensors, shards=2)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model-00002-of-00002.safetensors"):
        load_model(tmp_path)
