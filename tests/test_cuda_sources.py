"""Every CUDA source compiles for Hopper on a machine without a GPU (the CI machine has nvcc, no GPU):
the device code (.cu) with nvcc for sm_90a as CMake builds it, the torch-facing wrappers (.cpp)
against torch's headers (syntax only: linking needs a torch built with CUDA). A kernel that stops
compiling fails here, not on the lent GPU; so does one whose wgmma products ptxas serializes (C7514: a
non-wgmma instruction may read an accumulator before its wait, e.g. a wait under a condition), which compiles
and passes every test but ran 30–46% slower on the H200 (docs/benchmarks.md, thirty-fifth session)."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch.utils.cpp_extension

ROOT = Path(__file__).resolve().parents[1]
CUDA_DIR = ROOT / "cpp" / "kernels" / "cuda"
NVCC = shutil.which("nvcc")
CXX = shutil.which("g++") or shutil.which("c++")
# The flags of CMakeLists.txt's mtpserve_cuda_kernels target, for the arch CI checks.
NVCC_FLAGS = ["-std=c++20", "-O3", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a"]

device_sources = sorted(CUDA_DIR.glob("*.cu"))
# Standalone diagnostic programs the benchmark notes ran on the lent GPU (each says how to build it).
diagnostic_sources = sorted((ROOT / "docs").rglob("*.cu"))
wrapper_sources = sorted(CUDA_DIR.glob("*.cpp"))
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def cuda_include() -> Path:
    """The toolkit's include folder (nvcc may be a wrapper script outside the toolkit)."""
    homes = [os.environ.get("CUDA_HOME"), Path(NVCC).resolve().parents[1], "/usr/local/cuda"]
    return next(Path(h) / "include" for h in homes if h and (Path(h) / "include" / "cuda_runtime.h").is_file())


def names(paths):
    return [p.name for p in paths]


def test_device_code_includes_no_torch():
    for source in [*CUDA_DIR.glob("*.cu"), *CUDA_DIR.glob("*.cuh")]:
        includes = re.findall(r'#include\s*[<"]([^>"]+)[>"]', source.read_text())
        assert not [i for i in includes if i.split("/")[0] in ("ATen", "c10", "torch")], source.name


@needs_nvcc
@pytest.mark.parametrize("source", device_sources, ids=names(device_sources))
def test_device_code_compiles_for_sm90a(source, tmp_path):
    result = subprocess.run([NVCC, *NVCC_FLAGS, "-I", str(ROOT / "cpp"), "-c", str(source), "-o",
                             str(tmp_path / "out.o")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    serialized = [line for line in result.stderr.splitlines() if "C7514" in line]
    assert not serialized, "ptxas serializes wgmma products:\n" + "\n".join(serialized)


@needs_nvcc
@pytest.mark.parametrize("source", diagnostic_sources, ids=names(diagnostic_sources))
def test_diagnostic_programs_compile_for_sm90a(source, tmp_path):
    result = subprocess.run([NVCC, "-std=c++17", "-O2", "-arch=sm_90a", "-c", str(source), "-o",
                             str(tmp_path / "out.o")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_nvcc
@pytest.mark.parametrize("source", wrapper_sources, ids=names(wrapper_sources))
def test_wrapper_compiles_against_torch(source):
    includes = [f"-I{p}" for p in [*torch.utils.cpp_extension.include_paths(), cuda_include(), ROOT / "cpp"]]
    # The CPU torch wheel ships c10/cuda's headers but not its generated CMake macros file.
    result = subprocess.run([CXX, "-std=c++20", "-fsyntax-only", "-DMTPSERVE_WITH_CUDA",
                             "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", *includes, str(source)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
