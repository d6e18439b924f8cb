"""The CUDA per-token ops (marker cuda) against the CPU kernels of the same interface: rms_norm,
add_rms_norm, rotary and silu_and_mul on random inputs in bf16/fp16/fp32, DeepSeek's hidden 7168 and the
tiny model's 80 plus widths the vectorised paths do not take, strided views, and batch invariance."""
import pytest
import torch

from mtpserve import _C

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")]

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
EPS = 1e-6
# Two ulps of the final rounding: the GPU rounds in the CPU's order, but its sum of squares (another fp32
# reduction order) and its exp may differ in the last fp32 bit, which flips a rare half-precision rounding
# of the normalised value by one ulp, and the product with the weight is rounded again. fp32 outputs carry
# only those last-bit differences.
RTOL = {torch.bfloat16: 2**-7, torch.float16: 2**-9, torch.float32: 1e-5}
ATOL = {torch.bfloat16: 1e-5, torch.float16: 1e-5, torch.float32: 1e-6}
# Those flips need a value within ~1e-7 of a rounding boundary: in half precision almost every
# element is bit-identical to the CPU's.
MAX_FLIPPED = 0.01


def close(gpu: torch.Tensor, cpu: torch.Tensor) -> None:
    assert gpu.dtype == cpu.dtype and gpu.shape == cpu.shape
    gpu = gpu.cpu()
    torch.testing.assert_close(gpu.float(), cpu.float(), rtol=RTOL[cpu.dtype], atol=ATOL[cpu.dtype])
    if cpu.dtype != torch.float32:
        assert (gpu != cpu).float().mean().item() <= MAX_FLIPPED


def randn(*shape, dtype=torch.float32, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 5, 300])
@pytest.mark.parametrize("dim", [7168, 80, 7])
def test_rms_norm(dtype, rows, dim):
    x = randn(rows, dim, dtype=dtype, seed=rows + dim)
    weight = (1 + 0.1 * randn(dim, seed=1)).to(dtype)
    close(_C.rms_norm(x.cuda(), weight.cuda(), EPS), _C.rms_norm(x, weight, EPS))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rms_norm_fp32_weight_promotes(dtype):
    # weight * normed promotes to fp32 on the CPU when the weight is fp32: so must the GPU.
    x, weight = randn(9, 80, dtype=dtype), 1 + 0.1 * randn(80, seed=1)
    close(_C.rms_norm(x.cuda(), weight.cuda(), EPS), _C.rms_norm(x, weight, EPS))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_of_strided_and_3d_views(dtype):
    # The model normalises kv_a.narrow(1, 0, kv_lora_rank): rows further apart than their width.
    full = randn(33, 512 + 64, dtype=dtype, seed=3)
    weight = (1 + 0.1 * randn(512, seed=4)).to(dtype)
    close(_C.rms_norm(full.cuda().narrow(1, 0, 512), weight.cuda(), EPS), _C.rms_norm(full.narrow(1, 0, 512), weight, EPS))
    x = randn(4, 3, 80, dtype=dtype, seed=5)
    w80 = (1 + 0.1 * randn(80, seed=6)).to(dtype)
    close(_C.rms_norm(x.cuda(), w80.cuda(), EPS), _C.rms_norm(x, w80, EPS))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_is_batch_invariant(dtype):
    # Each row's reduction order depends on its width only: a row gives the same bits in any batch.
    x = randn(300, 7168, dtype=dtype, seed=7).cuda()
    weight = (1 + 0.1 * randn(7168, seed=8)).to(dtype).cuda()
    full = _C.rms_norm(x, weight, EPS)
    for rows in (slice(0, 1), slice(17, 21), slice(299, 300)):
        assert torch.equal(_C.rms_norm(x[rows].contiguous(), weight, EPS), full[rows])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,dim", [(1, 7168), (300, 7168), (5, 80), (6, 7)])
def test_add_rms_norm(dtype, rows, dim):
    x, delta = randn(rows, dim, dtype=dtype, seed=dim), randn(rows, dim, dtype=dtype, seed=dim + 1)
    weight = (1 + 0.1 * randn(dim, seed=2)).to(dtype)
    gpu_sum, gpu_normed = _C.add_rms_norm(x.cuda(), delta.cuda(), weight.cuda(), EPS)
    cpu_sum, cpu_normed = _C.add_rms_norm(x, delta, weight, EPS)
    # One rounded add, as the CPU's: bit-identical.
    assert torch.equal(gpu_sum.cpu(), cpu_sum)
    close(gpu_normed, cpu_normed)


def rope_tables(max_positions: int, half: int) -> tuple[torch.Tensor, torch.Tensor]:
    angles = torch.rand(max_positions, half, generator=torch.Generator().manual_seed(9)) * 6.3
    return angles.cos(), angles.sin()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 64), (300, 64), (7, 16, 64), (5, 2, 3, 10)])
def test_rotary(dtype, shape):
    x = randn(*shape, dtype=dtype, seed=len(shape))
    cos, sin = rope_tables(4096, shape[-1] // 2)
    positions = torch.randint(0, 4096, (shape[0],), generator=torch.Generator().manual_seed(10))
    gpu = _C.rotary(x.cuda(), positions.cuda(), cos.cuda(), sin.cuda())
    # Every product and sum rounded in the CPU's order, without fused multiply-adds: bit-identical.
    assert torch.equal(gpu.cpu(), _C.rotary(x, positions, cos, sin))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_of_strided_view(dtype):
    # The model rotates q.narrow(2, nope, rope) of q [tokens, heads, nope + rope] in place of a copy.
    q = randn(11, 16, 128 + 64, dtype=dtype, seed=12)
    cos, sin = rope_tables(64, 32)
    positions = torch.randint(0, 64, (11,), generator=torch.Generator().manual_seed(13))
    gpu = _C.rotary(q.cuda().narrow(2, 128, 64), positions.cuda(), cos.cuda(), sin.cuda())
    assert gpu.is_contiguous()
    assert torch.equal(gpu.cpu(), _C.rotary(q.narrow(2, 128, 64), positions, cos, sin))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2 * 2048), (300, 2 * 2048), (9, 2 * 20), (4, 3, 2 * 7)])
def test_silu_and_mul(dtype, shape):
    gate_up = (2 * randn(*shape, seed=shape[-1])).to(dtype)
    close(_C.silu_and_mul(gate_up.cuda()), _C.silu_and_mul(gate_up))


def test_bad_inputs_are_rejected():
    x = torch.randn(4, 80, device="cuda")
    with pytest.raises((ValueError, RuntimeError), match="weight"):
        _C.rms_norm(x, torch.ones(64, device="cuda"), EPS)
    with pytest.raises((ValueError, RuntimeError), match="positions"):
        _C.rotary(x[:, :64], torch.zeros(3, dtype=torch.long, device="cuda"), torch.ones(8, 32, device="cuda"),
                  torch.ones(8, 32, device="cuda"))


def composed_latent_write(cache, kv, weight, positions, cos, sin, slots):
    """What write_latent_kv replaces: the separate norm, rotary and cache-write launches."""
    lora = weight.shape[0]
    latent = torch.cat([_C.rms_norm(kv[:, :lora], weight, EPS), _C.rotary(kv[:, lora:], positions, cos, sin)], -1)
    _C.write_latent_cache(cache, latent, slots)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lora, rope", [(512, 64), (64, 16), (7, 4)], ids=["v3", "tiny", "unvectorised"])
def test_write_latent_kv_is_the_composed_ops(dtype, lora, rope):
    # kv is a slice of the fused down projection (strided rows); padding slots (-1) are skipped.
    tokens, blocks, block_size = 37, 6, 16
    down = randn(tokens, 128 + lora + rope, dtype=dtype, seed=lora)
    kv = down[:, 128:]
    weight = (1 + 0.1 * randn(lora, seed=2)).to(dtype)
    cos, sin = rope_tables(512, rope // 2)
    gen = torch.Generator().manual_seed(lora + rope)
    positions = torch.randint(0, 512, (tokens,), generator=gen)
    slots = torch.randperm(blocks * block_size, generator=gen)[:tokens]
    slots[::5] = -1
    args = [t.cuda() for t in (kv, weight, positions, cos, sin, slots)]
    fused = torch.zeros(blocks, block_size, lora + rope, dtype=dtype, device="cuda")
    _C.write_latent_kv(fused, args[0], args[1], EPS, *args[2:])
    composed = torch.zeros_like(fused)
    composed_latent_write(composed, *args)
    assert torch.equal(fused, composed)  # the same threads, reduction tree and roundings as the separate ops
    reference = torch.zeros(blocks, block_size, lora + rope, dtype=dtype)
    _C.write_latent_kv(reference, kv, weight, EPS, positions, cos, sin, slots)  # CPU: the composed ops
    close(fused.cpu(), reference)
