"""The CUDA paged MLA attention and latent cache write (marker cuda) against the CPU kernels of the same
bindings: the same call on CPU tensors is the reference, computed in fp32 on upcast copies of the very
bf16/fp16 values the GPU reads. Covers ragged batches (decode, MTP verify k = 1..3 and a ~300-row prefill
chunk in one call), shuffled block tables crossing block boundaries, block sizes 1/16/24/64, heads
8/16/128, the tensor-core shapes (D = 512 + 64 and 64 + 16) and the SIMT fallback (fp32, odd shapes), and
long contexts with a small batch, which the launch splits over KV (split-KV + combine)."""
import random

import pytest
import torch

from mtpserve import _C

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")]

# fp32 runs the SIMT kernel: only summation order differs from the CPU. bf16/fp16 differ from the fp32
# reference by the rounding of the probabilities to the input dtype before P.V (relative 2^-9 / 2^-11 per
# weight) and of the output (2^-9 / 2^-11 relative); outputs are convex mixes of N(0, 1) cache values
# (|out| < 5), so each rounding stays below 1e-2 / 2.5e-3 even where one position holds all the weight.
TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=0, atol=2e-2),
             torch.float16: dict(rtol=0, atol=1e-2)}


def make_batch(query_lens, context_lens, heads, lora, rope, block_size, dtype, seed):
    """Random q and cache, each sequence's positions on shuffled blocks (so they cross block boundaries)."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    per_seq = [-(-c // block_size) for c in context_lens]
    num_blocks = sum(per_seq) + 3
    free = list(range(num_blocks))
    rng.shuffle(free)
    tables = [[free.pop() for _ in range(n)] for n in per_seq]
    width = max(1, max(per_seq))
    query_start = [0]
    for n in query_lens:
        query_start.append(query_start[-1] + n)
    dim = lora + rope
    return dict(
        q=torch.randn(query_start[-1], heads, dim, generator=gen).to(dtype),
        cache=torch.randn(num_blocks, block_size, dim, generator=gen).to(dtype),
        block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
        query_start=torch.tensor(query_start, dtype=torch.int32),
        context_lens=torch.tensor(context_lens, dtype=torch.int32),
        max_query_len=max(query_lens),
        max_context_len=max(context_lens),
        kv_lora_rank=lora,
        scale=dim ** -0.5,
    )


def on(batch, device, float32=False):
    moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    if float32:
        moved["q"], moved["cache"] = moved["q"].float(), moved["cache"].float()
    return moved


def check(batch):
    gpu = _C.mla_attention(**on(batch, "cuda")).cpu()
    assert gpu.dtype == batch["q"].dtype
    expected = _C.mla_attention(**on(batch, "cpu", float32=True))
    torch.testing.assert_close(gpu.float(), expected, **TOLERANCE[batch["q"].dtype])


def contexts_for(query_lens, rng, lo=1, hi=700):
    return [rng.randrange(max(lo, n), max(lo, n) + hi) for n in query_lens]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", [(16, 512, 64), (8, 64, 16)], ids=["real-tp8", "tiny"])
def test_ragged_batch_with_prefill_chunk(dtype, shape):
    """Decodes, verifies k = 1..3, an empty sequence and a 300-row prefill chunk in one launch."""
    heads, lora, rope = shape
    rng = random.Random(1)
    query_lens = [1, 2, 3, 4, 0, 300, 1, 4]
    context_lens = [rng.randrange(n + 1, 2000) for n in query_lens]
    context_lens[5] = 300 + 517  # the chunk follows 517 cached tokens
    check(make_batch(query_lens, context_lens, heads, lora, rope, 64, dtype, seed=2))


@pytest.mark.parametrize("block_size", [1, 16, 24, 64, 128])
@pytest.mark.parametrize("heads", [8, 16, 128])
@pytest.mark.parametrize("shape", [(512, 64), (64, 16)], ids=["d576", "d80"])
def test_decode_and_verify(shape, heads, block_size):
    """Decode (k = 0) and MTP verify (k = 1..3 drafts: k + 1 rows per sequence) over shuffled blocks."""
    lora, rope = shape
    for k in range(4):
        rng = random.Random(heads * 100 + k * 10 + block_size)
        query_lens = [k + 1] * 5
        context_lens = contexts_for(query_lens, rng)
        check(make_batch(query_lens, context_lens, heads, lora, rope, block_size, torch.bfloat16, seed=k + block_size))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", [0, 1, 3])
def test_short_contexts(k, dtype):
    """Contexts from a single position up; rows whose causal limit ends inside a KV tile."""
    for context in [1, 2, 63, 64, 65, 1000]:
        n = min(k + 1, context)
        check(make_batch([n, n], [context, context], 16, 512, 64, 16, dtype, seed=context + k))


@pytest.mark.parametrize("block_size", [16, 32, 64])
@pytest.mark.parametrize("shape", [(16, 512, 64), (8, 64, 16)], ids=["real-tp8", "tiny"])
def test_cache_rows_past_the_context_never_reach_the_output(shape, block_size):
    """Every cache row that no sequence owns holds NaN, as freed or never-written blocks may: the tiles that
    end a sequence's context (in the Hopper kernel, whole 64-token tiles copied in bulk when the block size is a
    multiple of 64) must keep those rows out of P V."""
    heads, lora, rope = shape
    query_lens = [1, 4, 2]
    batch = make_batch(query_lens, [1, 61, 1000], heads, lora, rope, block_size, torch.bfloat16, seed=5)
    cache = batch["cache"].view(-1, lora + rope)
    owned = torch.zeros(cache.size(0), dtype=torch.bool)
    for table, context in zip(batch["block_tables"].tolist(), batch["context_lens"].tolist()):
        for pos in range(context):
            owned[table[pos // block_size] * block_size + pos % block_size] = True
    cache[~owned] = float("nan")
    check(batch)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(16, 512, 64), (8, 64, 16)], ids=["real-tp8", "tiny"])
def test_peaked_scores_whose_maximum_climbs_across_tiles(dtype, shape):
    """Queries 6x the usual size: tile after tile, a row's running maximum climbs both by less than the 2^8
    that the kernels let probabilities grow to before they rescale the output and by more (split and not)."""
    heads, lora, rope = shape
    batch = make_batch([1, 4, 2], [3000, 700, 64], heads, lora, rope, 64, dtype, seed=21)
    batch["q"] = (batch["q"].float() * 6).to(dtype)
    check(batch)


@pytest.mark.parametrize("query_len", [1, 2, 4])
@pytest.mark.parametrize("context,seqs", [(8192, 1), (5000, 2), (3843, 1), (8192, 4)])
@pytest.mark.parametrize("shape", [(16, 512, 64), (128, 512, 64), (8, 64, 16)], ids=["h16", "h128", "tiny"])
def test_long_context_split_kv(shape, context, seqs, query_len):
    """A small batch over a long context runs split-KV + combine. With 3843 positions and 4 rows the first
    row's causal limit ends exactly at a split boundary under the current policy (15 splits of 320), so a
    split holds positions none of that row's entries see (it must contribute nothing)."""
    heads, lora, rope = shape
    check(make_batch([query_len] * seqs, [context] * seqs, heads, lora, rope, 64, torch.bfloat16, seed=context))


def test_split_kv_replayed_from_a_cuda_graph():
    """On a Hopper GPU at 512 + 64, a launch with a few KV splits whose clusters the GPU holds at once combines
    its splits inside the attention kernel (40 one-row sequences of ~2000 positions take 3 splits: 40 clusters
    of 3 blocks, which pass their partials through shared memory). Replays of a captured call must keep giving
    the eager call's output bit for bit, and that output must match the CPU reference."""
    rng = random.Random(7)
    batch = make_batch([1] * 40, [rng.randrange(1800, 2049) for _ in range(40)], 16, 512, 64, 64, torch.bfloat16,
                       seed=7)
    args = on(batch, "cuda")
    eager = _C.mla_attention(**args)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _C.mla_attention(**args)
    for _ in range(5):
        out.fill_(float("nan"))
        graph.replay()
        assert torch.equal(out, eager)
        assert torch.equal(_C.mla_attention(**args), eager)
    check(batch)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(3, 48, 8), (16, 512, 64), (2, 100, 28)], ids=["odd", "real", "d128"])
def test_simt_fallback_shapes(shape, dtype):
    """Shapes the tensor-core kernel does not cover (and fp32 at the real shape) run the SIMT kernel."""
    heads, lora, rope = shape
    rng = random.Random(7)
    query_lens = [1, 3, 17, 2]
    check(make_batch(query_lens, contexts_for(query_lens, rng, hi=900), heads, lora, rope, 24, dtype, seed=3))


def test_fp32_long_context_is_accurate():
    check(make_batch([4, 1], [8192, 3000], 16, 512, 64, 64, torch.float32, seed=11))


@pytest.mark.parametrize("cache_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("rows_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("dim", [576, 80, 20])
def test_write_latent_cache(dim, rows_dtype, cache_dtype):
    """Only the slotted rows change, to the rows converted to the cache dtype; negative slots are skipped."""
    gen = torch.Generator().manual_seed(dim)
    blocks, block_size, tokens = 9, 16, 40
    poison = torch.full((blocks, block_size, dim), 1234.5).to(cache_dtype)
    rows = torch.randn(tokens, dim, generator=gen).to(rows_dtype)
    slots = torch.randperm(blocks * block_size, generator=gen)[:tokens]
    slots[::5] = -1
    gpu_cache = poison.cuda()
    _C.write_latent_cache(gpu_cache, rows.cuda(), slots.cuda())
    cpu_cache = poison.clone()
    _C.write_latent_cache(cpu_cache, rows, slots)
    assert torch.equal(gpu_cache.cpu(), cpu_cache)
    flat = gpu_cache.cpu().view(-1, dim)
    kept = slots >= 0
    assert torch.equal(flat[slots[kept]], rows[kept].to(cache_dtype))
    untouched = torch.ones(blocks * block_size, dtype=torch.bool)
    untouched[slots[kept]] = False
    assert torch.equal(flat[untouched], poison.view(-1, dim)[untouched])
