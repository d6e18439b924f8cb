"""The row counts eager forwards are padded to (KernelOps::eager_rows): none on the CPU; on a GPU one of few counts,
so that cuBLAS reuses its kernel choice for each GEMM (a new row count cost an H200 0.1-1.7 ms of host time per GEMM),
at most 1/16 more rows from 128 rows on."""
import pytest
import torch

from mtpserve import _C


def test_the_cpu_pads_nothing():
    assert [_C.eager_rows("cpu", n) for n in range(0, 3000)] == list(range(0, 3000))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
def test_the_gpu_pads_to_few_row_counts_and_little_more():
    padded = [_C.eager_rows("cuda:0", n) for n in range(1, 10241)]
    for n, p in zip(range(1, 10241), padded):
        assert n <= p <= max(n + 7, n * 17 // 16), (n, p)
        assert _C.eager_rows("cuda:0", p) == p, (n, p)  # a padded count pads to itself
    assert len(set(padded)) <= 32 + 16 * 6  # multiples of 8 below 256, then 16 per octave up to 16384
    assert _C.eager_rows("cuda:0", 0) == 0
