"""Batch-invariant mode (--batch_invariant): every op gives each token row bit-identical results
whatever else is in the step, so in bf16 as in fp32 greedy MTP (k = 1..3) equals k = 0 token for
token, a request's output is the same alone and in any batch, and a seeded sampled request gives the
same tokens alone and amid other traffic. Kernel-level checks first, then the engine end to end on
the embedded model (default bf16) and the tiny random model; each on the CPU and, where there is one,
the GPU (marker cuda; CUDA graphs on there, so decode steps also run padded to graph buckets)."""
import argparse
import json
import os
import random
import subprocess
import sys

import pytest
import torch

from conftest import DEVICES
from mtpserve import LLM, _C
from mtpserve.cli import add_engine_flags, engine_args
from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.sampling_params import SamplingParams

BI = _C.batch_invariant
DTYPES = [torch.bfloat16, torch.float32]
DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float32: "float32"}
ROW_COUNTS = (1, 2, 4, 5, 16, 17, 40)  # decode, verify (k + 1), a full tile, padding, prefill chunks


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.fixture(params=DEVICES)
def on(request):
    """Moves tensors made on the CPU (seeded generators) to the device under test."""
    return lambda t: t.to(request.param)


def assert_rows_invariant(op, row, width, dtype, seed=0):
    """op(x)[i] for x = `row` placed at every position of batches of every size equals op(row alone)."""
    g = torch.Generator().manual_seed(seed)
    alone = op(row.unsqueeze(0))[0]
    for m in ROW_COUNTS:
        for pos in {0, m // 2, m - 1}:
            x = torch.randn(m, width, generator=g).to(dtype).to(row.device)
            x[pos] = row
            assert torch.equal(op(x)[pos], alone), f"rows={m} position={pos}"


# (K, N): the embedded model's and the tiny test model's projections, the fp32 router, the heads.
LINEAR_SHAPES = [(256, 128), (128, 192), (256, 80), (128, 256), (256, 1536), (768, 256), (64, 256), (512, 256),
                 (256, 8192), (64, 24), (24, 96), (64, 40), (64, 192), (96, 64), (32, 64), (64, 512)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_linear_rows_are_batch_invariant(dtype, threads, on):
    g = torch.Generator().manual_seed(1)
    for k, n in LINEAR_SHAPES:
        w = on((0.1 * torch.randn(n, k, generator=g)).to(dtype))
        row = on(torch.randn(k, generator=g).to(dtype))
        assert_rows_invariant(lambda x: BI.linear(x, w), row, k, dtype)
        torch.testing.assert_close(BI.linear(row[None], w).float(), _C.linear(row[None], w).float(),
                                   rtol=2e-2, atol=2e-2)
    router = on(torch.randn(16, 256, generator=g))
    assert_rows_invariant(lambda x: BI.linear(x, router), on(torch.randn(256, generator=g)), 256, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
def test_head_matmul_and_row_ops_are_batch_invariant(dtype, threads, on):
    g = torch.Generator().manual_seed(2)
    heads = 4
    for k, n in ((32, 64), (64, 32), (16, 32), (32, 16)):
        w = on((0.1 * torch.randn(heads, k, n, generator=g)).to(dtype))
        row = on(torch.randn(heads * k, generator=g).to(dtype))
        op = lambda x: BI.head_matmul(x.view(x.size(0), heads, k), w).reshape(x.size(0), -1)
        assert_rows_invariant(op, row, heads * k, dtype)
    for dim in (256, 128, 64, 24):
        weight = on((1 + 0.1 * torch.randn(dim, generator=g)).to(dtype))
        row = on(torch.randn(dim, generator=g).to(dtype))
        assert_rows_invariant(lambda x: BI.rms_norm(x, weight, 1e-6), row, dim, dtype)
        assert_rows_invariant(lambda x: BI.add_rms_norm(x, x.flip(1), weight, 1e-6)[1], row, dim, dtype)
        torch.testing.assert_close(BI.rms_norm(row[None], weight, 1e-6).float(),
                                   _C.rms_norm(row[None], weight, 1e-6).float(), rtol=2e-2, atol=2e-2)
    for width in (1536, 192, 128, 64):
        row = on(torch.randn(width, generator=g).to(dtype))
        assert_rows_invariant(BI.silu_and_mul, row, width, dtype)
        torch.testing.assert_close(BI.silu_and_mul(row[None]).float(), _C.silu_and_mul(row[None]).float(),
                                   rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
@pytest.mark.parametrize("experts,groups,topk_group,top_k,hidden,inter",
                         [(16, 4, 2, 4, 256, 64), (8, 2, 1, 2, 64, 32)], ids=["embedded", "tiny"])
def test_routing_and_moe_are_batch_invariant(dtype, threads, on, experts, groups, topk_group, top_k, hidden,
                                              inter):
    g = torch.Generator().manual_seed(3)
    bias = on(0.1 * torch.randn(experts, generator=g))
    gate_up = on((0.1 * torch.randn(experts, 2 * inter, hidden, generator=g)).to(dtype))
    down = on((0.1 * torch.randn(experts, hidden, inter, generator=g)).to(dtype))
    route = lambda logits: BI.route_noaux_tc(logits, bias, groups, topk_group, top_k, True, 2.5)
    logits = on(torch.randn(64, experts, generator=g))
    w_bi, e_bi = route(logits)
    w_ref, e_ref = _C.route_noaux_tc(logits, bias, groups, topk_group, top_k, True, 2.5)
    order = e_ref.argsort(1)
    assert torch.equal(e_bi.sort(1).values, e_ref.gather(1, order))  # the same experts, in another order
    torch.testing.assert_close(w_bi.gather(1, e_bi.argsort(1)), w_ref.gather(1, order))
    assert_rows_invariant(lambda x: torch.cat([t.float() for t in route(x)], 1), logits[0], experts, torch.float32)

    def moe(x):
        weights, chosen = route(BI.linear(x.float(), on(torch.full((experts, hidden), 0.01))) + x.float()[:, :experts])
        return BI.moe_experts(x, gate_up, down, weights, chosen)
    row = on(torch.randn(hidden, generator=g).to(dtype))
    assert_rows_invariant(moe, row, hidden, dtype)
    x = on(torch.randn(8, hidden, generator=g).to(dtype))
    weights, chosen = route(x.float()[:, :experts])
    torch.testing.assert_close(BI.moe_experts(x, gate_up, down, weights, chosen).float(),
                               _C.moe_experts(x, gate_up, down, weights, chosen).float(), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_NAMES.get)
@pytest.mark.parametrize("ctx", [45, 900, 1300, 2300], ids=["one-split", "few-splits", "split-kv", "many-splits"])
@pytest.mark.parametrize("shape", [(4, 64, 16, 8), (16, 512, 64, 64)], ids=["d80", "d576"])
def test_attention_row_is_the_same_in_decode_verify_and_prefill(dtype, threads, on, ctx, shape):
    """The last query row of a sequence with context c: alone (decode), as the last of k + 1 verify
    rows, inside a prefill chunk, and beside other sequences of any length. With 900 or 1300 positions and
    an 8192-row cache the GPU splits the KV (at fixed 256-position boundaries), and the other
    sequences change how many splits the launch has. On a Hopper GPU in bf16 the 512 + 64 shape runs the
    wgmma kernel (tiles taken in pairs by two warpgroups, copied in bulk from 64-row blocks), the 64 + 16 one
    the mma.sync kernel; with 900 or 1300 positions (4 or 6 splits) the wgmma kernel's blocks combine the
    splits themselves in clusters, except beside 40 other sequences, whose 41 clusters the GPU cannot hold at
    once: they leave the splits to the combine kernel. With 2300 positions (10 splits, more than a cluster
    holds) the combine kernel takes every row: at 512 + 64 in blocks of a warp for the row alone and of 256
    threads beside 40 others; and the wgmma kernel's second warpgroup scores its tiles early for the row alone
    (10 blocks) and late beside 40 others (410 blocks, more than half the SMs), in the same arithmetic."""
    cuda = on(torch.zeros(0)).is_cuda
    if ctx in (900, 2300) and not cuda:
        pytest.skip(f"{ctx} positions are for the GPU's split combines; the CPU does not split the KV")
    g = torch.Generator().manual_seed(4)
    heads, lora, rope, block = shape
    blocks = (256 if ctx < 100 else 8192) // block
    cache = on(torch.randn(blocks, block, lora + rope, generator=g).to(dtype))
    width = (ctx + 40 + block - 1) // block
    table = on(torch.randperm(blocks, generator=g)[:width].to(torch.int32))
    other_table = on(torch.randperm(blocks, generator=g)[:width].to(torch.int32))
    q_all = on(torch.randn(ctx, heads, lora + rope, generator=g).to(dtype))

    def last_row(q_len, others):
        """Sequence under test first or last among `others` (query lengths), its last q_len rows queried;
        the others' contexts end 3 positions before or 40 after the sequence's."""
        seqs = [(q_len, ctx, table, q_all[ctx - q_len:])]
        for i, n in enumerate(others):
            seqs.append((n, ctx - 3 if i % 2 == 0 else ctx + 40, other_table,
                         on(torch.randn(n, heads, lora + rope, generator=g).to(dtype))))
        if len(others) % 2:
            seqs.reverse()
        q = torch.cat([s[3] for s in seqs])
        starts = [0]
        for s in seqs:
            starts.append(starts[-1] + s[0])
        out = BI.mla_attention(q, cache, torch.stack([s[2] for s in seqs]),
                               on(torch.tensor(starts, dtype=torch.int32)),
                               on(torch.tensor([s[1] for s in seqs], dtype=torch.int32)), max(s[0] for s in seqs),
                               max(s[1] for s in seqs), lora, 0.1)
        mine = [i for i, s in enumerate(seqs) if s[2] is table][0]
        return out[starts[mine + 1] - 1]

    alone = last_row(1, [])
    for q_len in (1, 2, 4, 17, ctx) if ctx < 100 else (1, 2, 4, 17):
        for others in [[], [1], [4, 4, 4], [1, 30], [20]] + ([[1] * 40] if cuda else []):
            assert torch.equal(last_row(q_len, others), alone), f"q_len={q_len} others={others}"


def test_cli_flag():
    parser = argparse.ArgumentParser()
    add_engine_flags(parser)
    assert engine_args(parser.parse_args([])).batch_invariant is False
    assert engine_args(parser.parse_args(["--batch_invariant"])).batch_invariant is True
    assert engine_args(parser.parse_args(["--batch_invariant", "false"])).batch_invariant is False


# ---- the engine end to end -------------------------------------------------------------------

def prompts(n, seed, low=3, high=50, shared=0):
    rng = random.Random(seed)
    prefix = [rng.randrange(4, 400) for _ in range(shared)]
    return [prefix + [rng.randrange(4, 400) for _ in range(rng.randrange(low, high))] for _ in range(n)]


def tokens(outputs):
    return [o.outputs[0].token_ids for o in outputs]


# 8-token blocks and a 48-token step budget: long prompts chunk, and chunks share steps with decodes
# and verifies; batch 8 shares a 24-token prefix (prefix-cache hits on the second pass).
ENGINE = dict(block_size=8, max_cache_blocks=1024, max_tokens_per_batch=48, batch_invariant=True)
BATCHES = {1: prompts(1, 30), 8: prompts(8, 31, shared=24), 32: prompts(32, 32)}
GPU_BATCHES = {**BATCHES, 64: prompts(64, 35)}
MODELS = ["embedded", "tiny"]


def model_path(name, tiny_model_dir):
    return str(DEFAULT_MODEL if name == "embedded" else tiny_model_dir)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("model", MODELS)
def test_greedy_mtp_equals_no_mtp_token_for_token(model, dtype, device, tiny_model_dir):
    path = model_path(model, tiny_model_dir)
    greedy = SamplingParams(temperature=0, max_tokens=24 if model == "embedded" else 40, ignore_eos=True)
    batches = BATCHES if device == "cpu" else GPU_BATCHES
    reference = None
    for k in (0, 1, 2, 3):
        llm = LLM(path, dtype=dtype, devices=device, num_speculative_tokens=k, **ENGINE)
        try:
            got = {n: tokens(llm.generate(batch, greedy)) for n, batch in batches.items()}
            got["8 again"] = tokens(llm.generate(BATCHES[8], greedy))  # served from the prefix cache
            assert llm.stats().prefix_hits > 0
            if k == 0:
                # A request's output alone equals its output in a batch of 32 (and of 8).
                for p, expected in list(zip(BATCHES[32], got[32]))[:3] + [(BATCHES[8][5], got[8][5])]:
                    assert tokens(llm.generate([p], greedy))[0] == expected
                reference = got
            else:
                for n in got:
                    assert got[n] == reference[n], f"k={k}, batch {n}"
                assert llm.stats().spec.draft_tokens > 0
        finally:
            llm.shutdown()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_preemption_and_large_steps_keep_greedy_tokens(dtype, tiny_model_dir):
    """A cache too small for the batch (preemption and recompute), and one step of > 512 tokens (the
    engine's multi-thread steps) give the tokens of an uncontended k = 0 run."""
    batch = prompts(12, seed=33, low=10, high=30)
    big = prompts(16, seed=34, low=40, high=60)  # ~800 prompt tokens in one step
    greedy = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    plain = LLM(str(tiny_model_dir), dtype=dtype, batch_invariant=True, block_size=8, max_cache_blocks=1024)
    try:
        expected = tokens(plain.generate(batch, greedy))
        alone = [tokens(plain.generate([p], greedy))[0] for p in big[:2]]
    finally:
        plain.shutdown()
    for k in (0, 2):
        small = LLM(str(tiny_model_dir), dtype=dtype, batch_invariant=True, block_size=8, max_cache_blocks=24,
                    num_speculative_tokens=k)
        try:
            assert tokens(small.generate(batch, greedy)) == expected, f"k={k}"
            assert small.stats().preemptions > 0
        finally:
            small.shutdown()
    wide = LLM(str(tiny_model_dir), dtype=dtype, batch_invariant=True, block_size=8, max_cache_blocks=1024,
               num_speculative_tokens=2)
    try:
        assert tokens(wide.generate(big, greedy))[:2] == alone
    finally:
        wide.shutdown()


@pytest.mark.parametrize("k, plan_ahead", [(0, False), (2, False), (2, True)])
def test_seeded_sampling_is_the_same_alone_and_under_load(k, plan_ahead):
    """The embedded model in its default bf16: one seeded request (temperature 0.8) alone, then amid
    other traffic (greedy and sampled, other lengths), at another position each time. Planned ahead (as on a GPU),
    the seeded request still drafts its whole budget every step, up to its last."""
    llm = LLM(num_speculative_tokens=k, plan_ahead=plan_ahead, **ENGINE)
    try:
        assert llm.core.model.dtype == torch.bfloat16  # the default dtype
        prompt = prompts(1, 40, low=20, high=21)[0]
        seeded = SamplingParams(temperature=0.8, seed=1234, max_tokens=32, ignore_eos=True)
        alone = tokens(llm.generate([prompt], seeded))[0]
        assert tokens(llm.generate([prompt], seeded))[0] == alone
        others = prompts(15, 41)
        other_params = [SamplingParams(temperature=0 if i % 3 == 0 else 0.8, seed=i if i % 2 else None,
                                       max_tokens=16 + 3 * i, ignore_eos=True) for i in range(15)]
        for position in (0, 7, 15):
            batch = others[:position] + [prompt] + others[position:]
            params = other_params[:position] + [seeded] + other_params[position:]
            assert tokens(llm.generate(batch, params))[position] == alone, f"position {position}"
    finally:
        llm.shutdown()


# oneDNN picks its bf16 GEMM kernels by the CPU's instruction set, and each set rounds its own way: the README's
# prompt gives other tokens on AMX, AVX-512 BF16, AVX-512 and AVX2 CPUs. ONEDNN_MAX_CPU_ISA, read as a process
# starts, caps the set, so a child process runs the kernels of a CPU that this one is not.
OTHER_ISA_RUN = """
import json, sys
from mtpserve import LLM
from mtpserve.sampling_params import SamplingParams
prompts, engine = json.loads(sys.argv[1]), json.loads(sys.argv[2])
greedy = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
chat = [[{"role": "user", "content": "What is the capital of France?"}]]
out = {}
for k in (0, 1, 3):
    llm = LLM(num_speculative_tokens=k, **engine)
    try:
        outputs = llm.chat(chat, greedy) + llm.generate(prompts, greedy)
        out[k] = [o.outputs[0].token_ids for o in outputs]
    finally:
        llm.shutdown()
print(json.dumps(out))
"""


@pytest.mark.parametrize("isa", ["AVX2", "AVX512_CORE"])
def test_greedy_mtp_equals_no_mtp_on_other_cpu_instruction_sets(isa):
    """The embedded model in bf16 under another instruction set's GEMM kernels: greedy MTP (k = 1, 3) gives k = 0's
    tokens, the README's chat prompt first. Without --batch_invariant, k = 1 leaves k = 0's tokens on that prompt
    under AVX512_CORE on this project's development CPU (a Xeon with AMX)."""
    run = subprocess.run([sys.executable, "-c", OTHER_ISA_RUN, json.dumps(BATCHES[8]), json.dumps(ENGINE)],
                         env={**os.environ, "ONEDNN_MAX_CPU_ISA": isa}, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.splitlines()[-1])
    for k in ("1", "3"):
        for i, (with_mtp, without) in enumerate(zip(got[k], got["0"])):
            assert with_mtp == without, f"{isa}, k={k}, sequence {i}"
