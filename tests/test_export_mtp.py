"""export_deepseek_mtp / `mtpserve export-mtp`: the MTP layer of a (sharded, possibly FP8) checkpoint
as a standalone draft directory, streamed from only the shards that hold it, and the refusals."""
import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from checkpoints import write_checkpoint, write_tensors
from mtpserve.cli import main
from mtpserve.export_mtp import ExportError, export_mtp
from mtpserve.weights import CheckpointError
from test_checkpoint_loading import QUANTIZED, quantize_blockwise

REPO = Path(__file__).resolve().parents[1]
EMBEDDED = REPO / "models" / "tiny-dsv3-mtp"
LAYERS = 3  # checkpoints.BASE: the MTP layer is model.layers.3
MTP = f"model.layers.{LAYERS}."


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    path = tmp_path_factory.mktemp("sharded")
    tensors = write_checkpoint(path, seed=7, shards=3)
    (path / "tokenizer.json").write_text("{}")
    (path / "tokenizer_config.json").write_text("{}")
    (path / "generation_config.json").write_text('{"bos_token_id": 0}')
    return path, tensors


def copy_checkpoint(src: Path, dst: Path, tensors: dict, shards: int = 1, **config_changes) -> Path:
    """`tensors` written to dst with src's config.json, edited by config_changes (None deletes a key)."""
    dst.mkdir()
    write_tensors(dst, tensors, shards)
    config = json.loads((src / "config.json").read_text())
    for key, value in config_changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def write_layout(path: Path, tensors: dict, layout: dict[str, list[str]]) -> None:
    """Tensors sharded by hand: file name -> tensor names; with an index."""
    path.mkdir(exist_ok=True)
    for file, names in layout.items():
        save_file({n: tensors[n] for n in names}, str(path / file))
    weight_map = {n: file for file, names in layout.items() for n in names}
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def expected_bf16(name: str, t: torch.Tensor) -> torch.Tensor:
    return t.float() if name.endswith("e_score_correction_bias") else t.to(torch.bfloat16)


def test_sharded_checkpoint_exports_the_mtp_layer_in_bf16(sharded, tmp_path):
    src, tensors = sharded
    out = tmp_path / "draft"
    result = export_mtp(src, out, progress=False)

    mtp = {n: t for n, t in tensors.items() if n.startswith(MTP)}
    exported = load_file(str(out / "model.safetensors"))
    assert set(exported) == set(mtp) == set(result.tensors)
    for part in ("enorm", "hnorm", "eh_proj", "shared_head.norm", "shared_head.head", "embed_tokens",
                 "self_attn.kv_a_proj_with_mqa", "self_attn.q_proj", "mlp.gate", "mlp.shared_experts.up_proj",
                 "mlp.experts.7.down_proj", "input_layernorm", "post_attention_layernorm"):
        assert f"{MTP}{part}.weight" in exported
    for name, t in exported.items():
        assert t.dtype == (torch.float32 if name.endswith("_bias") else torch.bfloat16), name
        assert torch.equal(t, expected_bf16(name, mtp[name])), name
    assert exported[MTP + "mlp.gate.e_score_correction_bias"].abs().sum() > 0
    assert result.copied_from_target == []

    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == {n: "model.safetensors" for n in mtp}
    assert index["metadata"]["total_size"] == result.total_size == sum(
        t.numel() * t.element_size() for t in exported.values())
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert f.metadata() == {"format": "pt"}

    config = json.loads((out / "config.json").read_text())
    source_config = json.loads((src / "config.json").read_text())
    assert config["num_hidden_layers"] == LAYERS
    assert config["num_nextn_predict_layers"] == 1
    assert config["architectures"] == ["DeepseekV3MTPModel"]
    assert config["mtp_draft"] is True
    assert config["torch_dtype"] == "bfloat16"
    assert config["hidden_size"] == source_config["hidden_size"]
    assert sorted(result.copied_files) == ["generation_config.json", "tokenizer.json", "tokenizer_config.json"]
    assert (out / "generation_config.json").read_text() == '{"bos_token_id": 0}'


def test_fp8_checkpoint_exports_its_exact_dequantization(tmp_path):
    # hidden 160: 128 x 128 blocks with ragged edges.
    tensors = write_checkpoint(tmp_path / "float", seed=8, hidden_size=160, q_lora_rank=136)
    source, expected = {}, {}
    for name, t in tensors.items():
        if name.startswith(MTP) and QUANTIZED.search(name):
            q, scale = quantize_blockwise(t)
            source[name], source[name + "_scale_inv"] = q, scale
            rows, cols = t.shape
            exact = q.float() * scale.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
            expected[name] = exact.to(torch.bfloat16)
        else:
            source[name] = t
            if name.startswith(MTP):
                expected[name] = expected_bf16(name, t)
    fp8_dir = copy_checkpoint(tmp_path / "float", tmp_path / "fp8", source, shards=2, quantization_config={
        "quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]})
    weight_map = json.loads((fp8_dir / "model.safetensors.index.json").read_text())["weight_map"]
    assert any(weight_map[n] != weight_map[n + "_scale_inv"] for n in source if n + "_scale_inv" in source)
    assert (MTP + "eh_proj.weight_scale_inv") in source and (MTP + "mlp.experts.5.up_proj.weight_scale_inv") in source

    out = tmp_path / "draft"
    export_mtp(fp8_dir, out, progress=False)
    exported = load_file(str(out / "model.safetensors"))
    assert set(exported) == set(expected)  # no _scale_inv tensors
    for name, t in exported.items():
        assert t.dtype == expected[name].dtype and torch.equal(t, expected[name]), name
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["torch_dtype"] == "bfloat16"


def test_missing_own_embedding_and_head_are_copied_from_the_target(sharded, tmp_path):
    src, tensors = sharded
    without = {n: t for n, t in tensors.items() if n not in (MTP + "embed_tokens.weight", MTP + "shared_head.head.weight")}
    # A different target embedding than the MTP layer's would have: shows which one is copied.
    without["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"] + 1
    ckpt = copy_checkpoint(src, tmp_path / "ckpt", without, shards=2)
    result = export_mtp(ckpt, tmp_path / "draft", progress=False)
    exported = load_file(str(tmp_path / "draft" / "model.safetensors"))
    assert torch.equal(exported[MTP + "embed_tokens.weight"], without["model.embed_tokens.weight"].bfloat16())
    assert torch.equal(exported[MTP + "shared_head.head.weight"], tensors["lm_head.weight"].bfloat16())
    assert "model.embed_tokens.weight" not in exported and "lm_head.weight" not in exported
    assert len(result.copied_from_target) == 2


def test_reads_only_the_shards_holding_the_mtp_layer(sharded, tmp_path):
    src, tensors = sharded
    mtp = sorted(n for n in tensors if n.startswith(MTP))
    half = len(mtp) // 2
    rest = sorted(n for n in tensors if not n.startswith(MTP) and n not in ("model.embed_tokens.weight", "lm_head.weight"))
    target_io = ["model.embed_tokens.weight", "lm_head.weight"]

    # The MTP layer (with its own embedding and head) over two shards; the target's in two others.
    own = tmp_path / "own"
    write_layout(own, tensors, {"a.safetensors": mtp[:half], "b.safetensors": mtp[half:],
                                "target.safetensors": rest, "io.safetensors": target_io})
    (own / "config.json").write_text((src / "config.json").read_text())
    for file in ("target.safetensors", "io.safetensors"):
        (own / file).write_bytes(b"not a safetensors file")
    result = export_mtp(own, tmp_path / "draft_own", progress=False)
    assert result.shards_read == ["a.safetensors", "b.safetensors"]
    assert len(load_file(str(tmp_path / "draft_own" / "model.safetensors"))) == len(mtp)

    # Without its own copies the MTP layer needs the target's embedding and head, nothing else.
    lean = tmp_path / "lean"
    mtp_lean = [n for n in mtp if n not in (MTP + "embed_tokens.weight", MTP + "shared_head.head.weight")]
    write_layout(lean, tensors, {"mtp.safetensors": mtp_lean, "target.safetensors": rest, "io.safetensors": target_io})
    (lean / "config.json").write_text((src / "config.json").read_text())
    (lean / "target.safetensors").unlink()  # never downloaded: only layer N's shards are needed
    result = export_mtp(lean, tmp_path / "draft_lean", progress=False)
    assert result.shards_read == ["io.safetensors", "mtp.safetensors"]
    exported = load_file(str(tmp_path / "draft_lean" / "model.safetensors"))
    assert set(exported) == set(mtp)


def test_refuses_a_checkpoint_without_mtp_layer(sharded, tmp_path):
    src, tensors = sharded
    for i, value in enumerate((0, None)):  # num_nextn_predict_layers 0, or missing
        ckpt = copy_checkpoint(src, tmp_path / f"ckpt{i}", tensors, num_nextn_predict_layers=value)
        with pytest.raises(ExportError, match="has no MTP layer"):
            export_mtp(ckpt, tmp_path / f"out{i}", progress=False)
        assert not (tmp_path / f"out{i}").exists()


def test_refuses_a_missing_shard(sharded, tmp_path):
    src, tensors = sharded
    ckpt = copy_checkpoint(src, tmp_path / "ckpt", tensors, shards=3)
    (ckpt / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(CheckpointError, match="shard model-00002-of-00003.safetensors .* is missing"):
        export_mtp(ckpt, tmp_path / "out", progress=False)


def test_refuses_a_checkpoint_without_layer_n_tensors(sharded, tmp_path):
    src, tensors = sharded
    ckpt = copy_checkpoint(src, tmp_path / "ckpt", {n: t for n, t in tensors.items() if not n.startswith(MTP)})
    with pytest.raises(ExportError, match=rf"no tensors for the MTP layer model\.layers\.{LAYERS}\."):
        export_mtp(ckpt, tmp_path / "out", progress=False)


def test_refuses_fp8_without_scale(sharded, tmp_path):
    src, tensors = sharded
    q, _ = quantize_blockwise(tensors[MTP + "eh_proj.weight"])
    ckpt = copy_checkpoint(src, tmp_path / "ckpt", {**tensors, MTP + "eh_proj.weight": q})
    with pytest.raises(ExportError, match=rf"FP8 tensor '{MTP}eh_proj.weight' has no '.*_scale_inv'"):
        export_mtp(ckpt, tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_refuses_a_non_empty_output_dir_unless_forced(sharded, tmp_path):
    src, _ = sharded
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ExportError, match="is not empty .*--force"):
        export_mtp(src, out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    export_mtp(src, out, force=True, progress=False)
    assert (out / "model.safetensors").is_file() and (out / "notes.txt").read_text() == "keep me"
    with pytest.raises(ExportError, match="is the input directory"):
        export_mtp(src, src, force=True, progress=False)


def test_cli_export_mtp(sharded, tmp_path, capsys):
    src, tensors = sharded
    out = tmp_path / "draft"
    assert main(["export-mtp", "--input-dir", str(src), "--output-dir", str(out)]) == 0
    assert f"model.layers.{LAYERS}" in capsys.readouterr().out
    assert set(load_file(str(out / "model.safetensors"))) == {n for n in tensors if n.startswith(MTP)}
    assert main(["export-mtp", "--input-dir", str(src), "--output-dir", str(out)]) == 2
    assert "mtpserve: error: output directory" in capsys.readouterr().err
    assert main(["export-mtp", "--input-dir", str(src), "--output-dir", str(out), "--force"]) == 0


def test_exports_the_embedded_model(tmp_path):
    out = tmp_path / "draft"
    result = export_mtp(EMBEDDED, out, progress=False)
    source = json.loads((EMBEDDED / "config.json").read_text())
    n = source["num_hidden_layers"]
    assert result.layer == n
    assert {"config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json",
            "tokenizer_config.json", "generation_config.json"} <= {p.name for p in out.iterdir()}
    config = json.loads((out / "config.json").read_text())
    expected = {k: v for k, v in source.items() if k not in ("quantization_config", "auto_map", "dtype")}
    assert {k: v for k, v in config.items() if k != "dtype"} == {
        **expected, "num_nextn_predict_layers": 1, "architectures": ["DeepseekV3MTPModel"], "mtp_draft": True,
        "torch_dtype": "bfloat16"}
    with safe_open(str(out / "model.safetensors"), "pt") as f, \
            safe_open(str(EMBEDDED / "model.safetensors"), "pt") as g:
        names = set(f.keys())
        assert names == {k for k in g.keys() if k.startswith(f"model.layers.{n}.")} | {
            f"model.layers.{n}.embed_tokens.weight", f"model.layers.{n}.shared_head.head.weight"}
        assert torch.equal(f.get_tensor(f"model.layers.{n}.embed_tokens.weight"),
                           g.get_tensor("model.embed_tokens.weight").bfloat16())
        assert torch.equal(f.get_tensor(f"model.layers.{n}.shared_head.head.weight"),
                           g.get_tensor("lm_head.weight").bfloat16())
        assert torch.equal(f.get_tensor(f"model.layers.{n}.eh_proj.weight"),
                           g.get_tensor(f"model.layers.{n}.eh_proj.weight").bfloat16())
    assert set(json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]) == names
    assert (out / "tokenizer.json").read_bytes() == (EMBEDDED / "tokenizer.json").read_bytes()


def bf16_model(src: Path, dst: Path) -> Path:
    """src with its weights stored in bf16 (router biases fp32), so that the bf16 export loses nothing."""
    dst.mkdir()
    tensors = load_file(str(src / "model.safetensors"))
    save_file({n: t if n.endswith("_bias") else t.bfloat16() for n, t in tensors.items()}, str(dst / "model.safetensors"))
    for file in src.iterdir():
        if file.suffix != ".safetensors":
            shutil.copyfile(file, dst / file.name)
    return dst


@pytest.mark.parametrize("model", ["random", "embedded"])
def test_engine_with_exported_draft_matches_builtin_mtp(model, request, tmp_path):
    """The same tokens and the same acceptance counts with the MTP layer from the exported directory
    as from the main checkpoint. The random model has the MTP layer's own embedding and head, the
    embedded one borrows the target's; both are stored in bf16 so the export is exact."""
    from mtpserve import LLM
    from mtpserve.sampling_params import SamplingParams

    if model == "random":
        model_dir = bf16_model(request.getfixturevalue("tiny_model_dir"), tmp_path / "model")
    else:
        model_dir = EMBEDDED
    exported = tmp_path / "draft"
    export_mtp(model_dir, exported, progress=False)
    rng = random.Random(5)
    prompts = [[rng.randrange(4, 400) for _ in range(length)] for length in (5, 17, 40)]
    greedy = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    # The fixed policy: the draft counts compared below must not depend on measured step times.
    engine = dict(num_speculative_tokens=2, speculative_policy="fixed", dtype="float32", block_size=8,
                  max_cache_blocks=256)
    results = []
    for extra in ({}, {"draft_model": str(exported)}):
        llm = LLM(str(model_dir), **engine, **extra)
        try:
            outputs = llm.generate(prompts, greedy)
        finally:
            llm.shutdown()
        results.append([(o.outputs[0].token_ids, o.metrics.num_draft_tokens, o.metrics.num_accepted_tokens)
                        for o in outputs])
    builtin, draft = results
    assert all(len(ids) == 32 for ids, _, _ in builtin)
    assert sum(drafted for _, drafted, _ in builtin) > 0
    assert draft == builtin
