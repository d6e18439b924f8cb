"""FlashMLA's dense paged decode (Hopper, sm_90a) as a reference for bench_mla_attention.py --flashmla.

FlashMLA is the MLA decode kernel vLLM and SGLang run on Hopper; timing it on the same query rows, cache and
block tables as ours, in the same run, says where our kernel stands against the one users compare us with.
It is not a dependency: `load(checkout)` builds its dense-decode path alone (scheduling metadata, split-KV
combine, the bf16 kernel; nothing of its sparse, FP8 or sm100 paths) from a FlashMLA source tree whose
csrc/cutlass holds CUTLASS's include/ directory, against the installed torch, with our own two-line binding.
"""
import os

import torch
from torch.utils import cpp_extension

BINDING = """#include "api/dense_decode.h"
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("dense_decode_fwd", &dense_attn_decode_interface); }
"""
KERNELS = ("smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu", "smxx/decode/combine/combine.cu",
           "sm90/decode/dense/instantiations/bf16.cu")
CXX_FLAGS = ["-O3", "-std=c++20", "-DNDEBUG", "-DFLASH_MLA_DISABLE_FP16"]  # bf16 only, in every unit
NVCC_FLAGS = CXX_FLAGS + ["-D_USE_MATH_DEFINES",
              "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
              "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-gencode", "arch=compute_90a,code=sm_90a"]


def load(checkout: str, build_dir: str = "/tmp/flashmla_reference"):
    """The built extension: `dense_decode_fwd(q, kcache, 512, seqlens, block_table, scale, causal, meta, splits)`."""
    csrc = os.path.join(checkout, "csrc")
    needed = [os.path.join(csrc, k) for k in KERNELS] + [os.path.join(csrc, "cutlass", "include")]
    missing = [p for p in needed if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"not a FlashMLA checkout with CUTLASS in csrc/cutlass: missing {missing}")
    os.makedirs(build_dir, exist_ok=True)
    binding = os.path.join(build_dir, "binding.cpp")
    with open(binding, "w") as f:
        f.write(BINDING)
    # CUTLASS's host headers reach for libcu++ (cuda/std), which CUDA 13 keeps under include/cccl: nvcc finds it
    # there, the host compiler only when told.
    includes = [csrc, os.path.join(csrc, "sm90"), os.path.join(csrc, "kerutils", "include"),
                os.path.join(csrc, "cutlass", "include"),
                os.path.join(cpp_extension.CUDA_HOME or "", "include", "cccl")]
    sources = [binding] + [os.path.join(csrc, k) for k in KERNELS]
    return cpp_extension.load(name="flashmla_dense_reference", sources=sources, extra_include_paths=includes,
                              extra_cflags=CXX_FLAGS, extra_cuda_cflags=NVCC_FLAGS,
                              build_directory=build_dir, verbose=False)


class DenseDecode:
    """FlashMLA's call for one verify step: `batch` sequences of `rows` query rows (k + 1) over block tables of
    64-token pages of a [blocks, 64, 576] cache, each sequence at `context`; causal across a sequence's rows, so
    row i sees context - rows + 1 + i positions, as ours does. Its scheduling metadata is planned once here, as
    vLLM and SGLang plan it once per step, outside the timed calls."""

    def __init__(self, module, batch: int, rows: int, context: int, table: torch.Tensor, pool: torch.Tensor,
                 q: torch.Tensor, scale: float):
        self.module, self.scale = module, scale
        self.q = q.view(batch, rows, q.size(-2), q.size(-1))
        self.cache = pool.unsqueeze(2)
        self.seqlens = torch.full((batch,), context, device=q.device, dtype=torch.int32)
        self.meta, self.splits = None, None
        self.out = self(table)

    def __call__(self, table: torch.Tensor) -> torch.Tensor:
        """Output rows [batch * rows, heads, 512], in our layout."""
        out, _, self.meta, self.splits = self.module.dense_decode_fwd(
            self.q, self.cache, 512, self.seqlens, table, self.scale, True, self.meta, self.splits)
        return out.view(-1, self.q.size(2), 512)
