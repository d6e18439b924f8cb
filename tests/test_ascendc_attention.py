"""The Ascend C fused MTP MLA kernel (ascendc_kernels/), built unchanged with g++ against the CPU
shim of the Ascend C API, against the engine's CPU attention reference: ragged batches, KV runs
crossing cache blocks, contexts 1..4096, MTP k = 0..3, 16 and 128 heads, bf16 and fp16, the
split-KV combine (batch 1), and tilings that overflow the chip's on-chip buffers."""
import ctypes
import hashlib
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

from mtpserve import _C

ROOT = Path(__file__).resolve().parents[1] / "ascendc_kernels"
SOURCES = ["cpu_shim/run_on_cpu.cpp", "fused_mtp_mla_attention/fused_mtp_mla_attention.cpp",
           "fused_mtp_mla_attention/mla_split_combine.cpp", "fused_mtp_mla_attention/mla_host_tiling.cpp"]
LORA, ROPE = 512, 64
OK, TILING_REJECTED, KERNEL_FAILED = 0, 2, 3


def _build():
    """g++ builds the kernel + shim once per source hash (headers included) into the temp dir."""
    files = sorted(p for p in ROOT.rglob("*") if p.suffix in (".h", ".cpp"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:16]
    lib = Path(tempfile.gettempdir()) / f"mtpserve_ascendc_{digest}" / "libmla_shim.so"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(".tmp.so")
        subprocess.run(["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-pthread", "-Wall",
                        f"-I{ROOT / 'cpu_shim'}", f"-I{ROOT / 'fused_mtp_mla_attention'}",
                        *[str(ROOT / s) for s in SOURCES], "-o", str(tmp)], check=True)
        tmp.rename(lib)
    f = ctypes.CDLL(str(lib)).mtp_mla_attention_cpu
    P, I = ctypes.c_void_p, ctypes.c_int
    f.argtypes = [P, P, P, P, P, P, I, I, I, I, I, I, I, ctypes.c_float, I, I, I, I, ctypes.POINTER(I),
                  ctypes.c_char_p, I]
    f.restype = I
    return f


@pytest.fixture(scope="module")
def kernel():
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the CPU shim of the Ascend C kernel cannot be built")
    return _build()


def make_step(query_lens, context_lens, heads, block_size, dtype, seed=0):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    num_blocks = sum(-(-c // block_size) for c in context_lens) + 2
    blocks = list(range(num_blocks))
    rng.shuffle(blocks)  # scattered blocks: every KV tile gathers several runs
    tables = [[blocks.pop() for _ in range(-(-c // block_size))] for c in context_lens]
    width = max(len(t) for t in tables)
    query_start = [0]
    for n in query_lens:
        query_start.append(query_start[-1] + n)
    return dict(
        q=torch.randn(query_start[-1], heads, LORA + ROPE).to(dtype),
        cache=torch.randn(num_blocks, block_size, LORA + ROPE).to(dtype),
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
        query_start=torch.tensor(query_start, dtype=torch.int32),
        context_lens=torch.tensor(context_lens, dtype=torch.int32),
        scale=(LORA + ROPE) ** -0.5)


def run_kernel(kernel, step, rows_per_tile=0, check_capacity=True):
    q, cache, tables = step["q"], step["cache"], step["block_tables"]
    out = torch.full((q.shape[0], q.shape[1], LORA), float("nan"), dtype=q.dtype)
    msg, tasks = ctypes.create_string_buffer(1024), ctypes.c_int(0)
    rc = kernel(q.data_ptr(), cache.data_ptr(), tables.data_ptr(), step["query_start"].data_ptr(),
                step["context_lens"].data_ptr(), out.data_ptr(), 0 if q.dtype == torch.bfloat16 else 1,
                len(step["context_lens"]), tables.shape[1], q.shape[1], LORA, ROPE, cache.shape[1], step["scale"],
                rows_per_tile, 0, 0, int(check_capacity), ctypes.byref(tasks), msg, len(msg))
    return rc, msg.value.decode(), out, tasks.value


def reference(step):
    lens = (step["query_start"][1:] - step["query_start"][:-1]).tolist()
    return _C.mla_attention(step["q"], step["cache"], step["block_tables"], step["query_start"], step["context_lens"],
                            max(lens), int(step["context_lens"].max()), LORA, step["scale"])


CASES = [  # (query lens, context lens, heads, block size): k + 1 = query len
    ([1, 1, 1], [1, 17, 300], 16, 16),                # decode, ragged, block crossings
    ([2, 4, 3, 1], [2, 129, 640, 5], 16, 64),         # MTP verify k = 1, 3, 2 next to a decode
    ([4, 3], [5, 9], 16, 4),                          # tiny blocks: many runs per KV tile
    ([1], [4096], 16, 128),                           # batch 1 decode: split KV + combine
    ([4], [4096], 16, 64),                            # batch 1 verify k = 3: split KV, MTP tail split
    ([1, 4], [33, 1000], 128, 16),                    # 128 heads: several head groups per sequence
    ([3], [3], 128, 16),                              # context = query length: row 0 sees one position
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("query_lens,context_lens,heads,block_size", CASES)
def test_kernel_matches_cpu_reference(kernel, query_lens, context_lens, heads, block_size, dtype):
    step = make_step(query_lens, context_lens, heads, block_size, dtype, seed=len(query_lens) + heads)
    rc, msg, out, tasks = run_kernel(kernel, step)
    assert rc == OK, msg
    assert tasks > 0
    # P is rounded to the input type before P.V (as on the chip), so allow a few input ulps.
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=3e-3, rtol=3e-3)
    torch.testing.assert_close(out.float(), reference(step).float(), **tol)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_mtp_rows_see_their_own_prefix(kernel, k):
    """Row j of a verify step sees context - k + j positions: changing the last cache row may only
    change the last query row."""
    step = make_step([k + 1], [200], 16, 16, torch.float16, seed=k)
    _, _, before, _ = run_kernel(kernel, step)
    last = 199
    block = int(step["block_tables"][0][last // 16])
    step["cache"][block, last % 16] = torch.randn(LORA + ROPE).to(torch.float16) * 4
    rc, msg, after, _ = run_kernel(kernel, step)
    assert rc == OK, msg
    changed = (after != before).flatten(1).any(1).tolist()
    assert changed == [False] * k + [True]


def test_host_rejects_tiling_that_overflows_ub(kernel):
    step = make_step([4], [40], 32, 16, torch.bfloat16)
    rc, msg, _, _ = run_kernel(kernel, step, rows_per_tile=128)
    assert rc == TILING_REJECTED
    assert "UB" in msg and "196608" in msg


def test_shim_refuses_buffers_the_chip_does_not_have(kernel):
    """With the host check skipped, the kernel's own TPipe::InitBuffer fails on the shim, as the
    tile would overflow the vector core's 192 KiB UB on the chip."""
    step = make_step([4], [40], 32, 16, torch.bfloat16)
    rc, msg, _, _ = run_kernel(kernel, step, rows_per_tile=128, check_capacity=False)
    assert rc == KERNEL_FAILED
    assert "UB overflow" in msg
