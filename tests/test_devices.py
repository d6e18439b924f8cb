"""--devices: what resolves, and what fails at start-up with a message naming what was found."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from mtpserve import _C
from mtpserve.devices import DeviceError, rank_device, resolve_device
from mtpserve.engine_args import EngineArgs

ROOT = Path(__file__).resolve().parents[1]


def test_cpu_and_auto():
    assert resolve_device("cpu") == "cpu"
    expected = "cuda:0" if torch.cuda.is_available() and _C.has_cuda_kernels else "cpu"
    assert resolve_device("auto") == expected
    assert EngineArgs().device == expected


@pytest.mark.parametrize("spec,message", [
    ("tpu:0", "unknown device"),
    ("cuda:x", "cuda or cuda:N"),
    ("cuda:0,cuda:1", "one device per rank"),
    ("npu:0", "torch_npu"),
    ("npu:x", "npu or npu:N"),
])
def test_bad_devices_are_refused(spec, message):
    with pytest.raises(DeviceError, match=message):
        resolve_device(spec)


def test_a_list_of_devices_gives_each_rank_its_own():
    assert [rank_device("cuda:0, cuda:1", i, 2) for i in range(2)] == ["cuda:0", "cuda:1"]
    assert rank_device("cuda:3", 1, 2) == "cuda:3"
    with pytest.raises(DeviceError, match="lists 2 devices for --nnodes 4"):
        rank_device("cuda:0,cuda:1", 0, 4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cuda_without_a_gpu_names_what_is_there():
    with pytest.raises(DeviceError, match="no CUDA support|sees 0 GPU"):
        resolve_device("cuda:0")


def test_serve_on_a_missing_npu_exits_with_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mtpserve.cli", "serve", "--devices", "npu:0", "--port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "npu:0" in lines[0] and "torch_npu" in lines[0], result.stderr


@pytest.mark.skipif(not (ROOT / ".torch_npu" / "torch_npu.whl").exists(),
                    reason="run scripts/fetch_torch_npu_headers.py (scripts/setup.sh does)")
def test_serve_with_torch_npu_but_no_cann_exits_with_one_line(tmp_path):
    """The real torch_npu wheel, importable but without the CANN libraries it loads."""
    with zipfile.ZipFile(ROOT / ".torch_npu" / "torch_npu.whl") as wheel:
        wheel.extractall(tmp_path, [n for n in wheel.namelist() if n.startswith("torch_npu/")])
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "mtpserve.cli", "serve", "--devices", "npu:0", "--port", "0"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "torch_npu is installed but does not load" in lines[0] and "CANN" in lines[0], \
        result.stderr


def test_the_readme_generate_command_runs(tiny_model_dir, capsys):
    from mtpserve.cli import main

    assert main(["generate", "--model", str(tiny_model_dir), "--prompt", "hello", "--max_tokens", "4",
                 "--num_speculative_tokens", "1", "--max_cache_blocks", "16"]) == 0
    assert capsys.readouterr().out.strip()
