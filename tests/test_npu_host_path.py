"""The NPU host path (cpp/kernels/npu) checked on the CPU: its calls of torch_npu's ops reach the CPU stand-ins of
tests/npu_stand_ins.py, registered under torch_npu 2.13.0's own schemas, and must give what the CPU kernels give,
op by op and end to end (greedy output token for token, MTP k = 1..3 lossless). This checks our calls, not the
NPU. Also: the stand-ins' schemas are the wheel's, and the Ascend C launch compiles against the wheel's headers."""
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension

import npu_stand_ins
from mtpserve import LLM, _C
from mtpserve.sampling_params import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
TORCH_NPU = ROOT / ".torch_npu"  # scripts/fetch_torch_npu_headers.py, run by scripts/setup.sh
needs_wheel = pytest.mark.skipif(not (TORCH_NPU / "schemas.txt").exists(),
                                 reason="run scripts/fetch_torch_npu_headers.py (scripts/setup.sh does)")


@pytest.fixture(scope="module", autouse=True)
def stand_ins():
    npu_stand_ins.register()


@contextmanager
def npu_kernels():
    _C.use_npu_kernels_on_cpu(True)
    try:
        yield
    finally:
        _C.use_npu_kernels_on_cpu(False)


def both(fn, *args):
    """fn on the CPU kernels, then on the NPU kernels (through the stand-ins)."""
    cpu = fn(*args)
    with npu_kernels():
        return cpu, fn(*args)


@needs_wheel
def test_stand_ins_declare_torch_npus_schemas():
    declared = set((TORCH_NPU / "schemas.txt").read_text().splitlines())
    assert {name: schema in declared for name, schema in npu_stand_ins.SCHEMAS.items()} == \
        {name: True for name in npu_stand_ins.SCHEMAS}


@needs_wheel
@pytest.mark.parametrize("source", sorted((ROOT / "cpp" / "kernels" / "npu" / "cann").glob("*.cpp")),
                         ids=lambda p: p.name)
def test_ascendc_launch_compiles_against_the_wheels_headers(source):
    includes = [*torch.utils.cpp_extension.include_paths(), ROOT / "cpp",
                ROOT / "ascendc_kernels" / "fused_mtp_mla_attention", TORCH_NPU / "include",
                TORCH_NPU / "include" / "third_party" / "acl" / "inc"]
    cxx = shutil.which("g++") or shutil.which("c++")
    result = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-DMTPSERVE_WITH_ASCENDC",
                             *[f"-I{p}" for p in includes], str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_without_torch_npu_the_npu_kernels_say_what_is_missing():
    """A process that never registered the stand-ins: the first op names torch_npu."""
    code = ("import torch; from mtpserve import _C; _C.use_npu_kernels_on_cpu(True); "
            "_C.rms_norm(torch.ones(2, 4), torch.ones(4), 1e-6)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and "npu::npu_rms_norm is not registered" in result.stderr, result.stderr


@pytest.mark.parametrize("choice,message", [
    ("ascendc", "this build has no Ascend C kernels"),
    ("flash", "choose ascendc or fused_infer"),
])
def test_an_attention_choice_this_build_cannot_run_is_refused(choice, message):
    if _C.has_ascendc_kernels and choice == "ascendc":
        pytest.skip("this build has the Ascend C kernels")
    code = ("import torch; from mtpserve import _C; _C.use_npu_kernels_on_cpu(True); "
            "_C.rms_norm(torch.ones(2, 4), torch.ones(4), 1e-6)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "MTPSERVE_NPU_ATTENTION": choice})
    assert result.returncode != 0 and f"MTPSERVE_NPU_ATTENTION={choice}: {message}" in result.stderr, result.stderr


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norms_rope_and_swiglu_match_the_cpu_kernels(dtype):
    g = torch.Generator().manual_seed(0)
    x, delta = torch.randn(7, 3, 32, generator=g).to(dtype), torch.randn(7, 3, 32, generator=g).to(dtype)
    w = torch.randn(32, generator=g).to(dtype)
    assert torch.equal(*both(_C.rms_norm, x, w, 1e-6))
    (cpu_sum, cpu_norm), (npu_sum, npu_norm) = both(_C.add_rms_norm, x, delta, w, 1e-6)
    assert torch.equal(cpu_sum, npu_sum) and torch.equal(cpu_norm, npu_norm)
    cos, sin = torch.rand(64, 8, generator=g), torch.rand(64, 8, generator=g)
    positions = torch.randint(0, 64, (7,), generator=g)
    for rows in (x[..., :16], x[:, 0, :16]):  # per-head queries and the shared rotary key
        assert torch.equal(*both(_C.rotary, rows.contiguous(), positions, cos, sin))
    assert torch.equal(*both(_C.silu_and_mul, x.view(7, 96)))


@pytest.mark.parametrize("slots", [[3, -1, 17, 30, -1], [-1, -1, 5, 0], [-1, -1]], ids=["mixed", "padded-first",
                                                                                     "all-padding"])
def test_cache_writes_skip_padded_rows(slots):
    cache = torch.randn(4, 8, 24)
    rows = torch.randn(len(slots), 24)
    cpu, npu = cache.clone(), cache.clone()
    _C.write_latent_cache(cpu, rows, torch.tensor(slots))
    with npu_kernels():
        _C.write_latent_cache(npu, rows, torch.tensor(slots))
    assert torch.equal(cpu, npu)


def paged_step(query_lens, dtype, heads=4, lora=32, rope=8, block_size=8, seed=0):
    """q and a cache whose sequences sit in shuffled blocks, each with some context before its query."""
    g = torch.Generator().manual_seed(seed)
    contexts = [n + int(torch.randint(0, 30, (1,), generator=g)) for n in query_lens]
    widths = [-(-c // block_size) for c in contexts]
    blocks = torch.randperm(sum(widths) + 3, generator=g).int()
    tables, used = [], 0
    for w in widths:
        tables.append(blocks[used:used + w].tolist() + [0] * (max(widths) - w))
        used += w
    cache = torch.randn(len(blocks), block_size, lora + rope, generator=g).to(dtype)
    q = torch.randn(sum(query_lens), heads, lora + rope, generator=g).to(dtype)
    starts = torch.tensor([0, *query_lens], dtype=torch.int32).cumsum(0).int()
    return (q, cache, torch.tensor(tables, dtype=torch.int32), starts, torch.tensor(contexts, dtype=torch.int32),
            max(query_lens), max(contexts), lora, 0.3)


@pytest.mark.parametrize("query_lens", [[1, 1, 1], [2, 4, 3, 1], [1, 40, 4], [17]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_matches_the_cpu_kernel(query_lens, dtype):
    """Decode, MTP verify (up to 16 rows: one FIA batch each) and prefill chunks (cut into pieces of 16)."""
    cpu, npu = both(_C.mla_attention, *paged_step(query_lens, dtype, seed=len(query_lens)))
    torch.testing.assert_close(npu, cpu, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-2)


def test_routing_and_experts_match_the_cpu_kernels():
    g = torch.Generator().manual_seed(1)
    logits, bias = torch.randn(9, 16, generator=g), torch.randn(16, generator=g) * 0.1
    for norm in (True, False):
        (cpu_w, cpu_e), (npu_w, npu_e) = both(_C.route_noaux_tc, logits, bias, 4, 2, 4, norm, 2.5)
        assert torch.equal(cpu_e, npu_e) and torch.allclose(cpu_w, npu_w, rtol=1e-6, atol=0)
    x = torch.randn(9, 32, generator=g)
    gate_up, down = torch.randn(16, 48, 32, generator=g) * 0.1, torch.randn(16, 32, 24, generator=g) * 0.1
    for tokens in (2, 9):  # the CPU computes every expert for a handful of tokens, else groups by expert
        cpu, npu = both(_C.moe_experts, x[:tokens], gate_up, down, cpu_w[:tokens], cpu_e[:tokens])
        torch.testing.assert_close(npu, cpu, rtol=1e-5, atol=1e-6)


def test_greedy_verification_matches_the_cpu_kernel():
    g = torch.Generator().manual_seed(2)
    probs = torch.nn.functional.one_hot(torch.randint(0, 50, (10,), generator=g), 50).float()
    best = probs.argmax(-1)
    drafts = torch.stack([best[0:3], torch.tensor([best[4], 7, best[6]]), best[7:10]])
    drafts[2, 2] = (drafts[2, 2] + 1) % 50
    args = (probs, torch.tensor([0, 4, 7]), torch.tensor([3, 2, 2]), drafts, torch.zeros(3, dtype=torch.long),
            torch.zeros(3, dtype=torch.long), torch.ones(3, dtype=torch.bool), 3)
    (cpu_tokens, cpu_accepted), (npu_tokens, npu_accepted) = both(_C.sample_and_verify, *args)
    assert torch.equal(cpu_tokens, npu_tokens) and torch.equal(cpu_accepted, npu_accepted)
    assert cpu_accepted.tolist() == [3, 1, 2]


@pytest.mark.parametrize("max_drafts", [0, 1, 3])
def test_sampled_verification_draws_what_the_cpu_kernel_draws(max_drafts):
    """Mixed greedy and sampled rows, drafts that are likely, unlikely or of probability 0 (top-k masks)."""
    g = torch.Generator().manual_seed(3 + max_drafts)
    seqs, vocab = 24, 40
    num_drafts = torch.randint(0, max_drafts + 1, (seqs,), generator=g)
    first_row = torch.cat([torch.zeros(1, dtype=torch.long), (num_drafts + 1).cumsum(0)[:-1]])
    logits = torch.randn(int((num_drafts + 1).sum()), vocab, generator=g) * 2
    logits[torch.rand(logits.shape, generator=g) < 0.5] = float("-inf")
    logits[:, 0] = 0.0  # every row keeps a token
    probs = torch.softmax(logits, -1)
    likely = probs.argmax(-1)
    drafts = torch.randint(0, vocab, (seqs, max_drafts), generator=g)
    for s in range(seqs):
        for j in range(int(num_drafts[s])):
            if torch.rand(1, generator=g) < 0.6:
                drafts[s, j] = likely[first_row[s] + j]
    args = (probs, first_row, num_drafts, drafts, torch.randint(0, 2**62, (seqs,), generator=g),
            torch.randint(0, 100, (seqs,), generator=g), torch.rand(seqs, generator=g) < 0.3, max_drafts)
    (cpu_tokens, cpu_accepted), (npu_tokens, npu_accepted) = both(_C.sample_and_verify, *args)
    assert torch.equal(cpu_tokens, npu_tokens) and torch.equal(cpu_accepted, npu_accepted)
    if max_drafts:
        assert 0 < int(cpu_accepted.sum()) < int(num_drafts.sum())  # both accepts and rejections happened


GREEDY = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
ENGINE = dict(block_size=8, max_cache_blocks=256, max_tokens_per_batch=48, speculative_policy="fixed")
# Prompt lengths: decode-sized, one MTP verify-sized, and prefill chunks longer than 16 rows.
PROMPTS = [[5 + i for i in range(n)] for n in (3, 11, 29, 40)]


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def cpu_baseline(request, tiny_model_dir):
    llm = LLM(str(tiny_model_dir), dtype=request.param, **ENGINE)
    try:
        yield request.param, [o.outputs[0].token_ids for o in llm.generate(PROMPTS, GREEDY)]
    finally:
        llm.shutdown()


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_greedy_output_through_the_npu_kernels_equals_the_cpu_backend(tiny_model_dir, cpu_baseline, k):
    dtype, expected = cpu_baseline
    with npu_kernels():
        llm = LLM(str(tiny_model_dir), dtype=dtype, num_speculative_tokens=k, **ENGINE)
        try:
            assert [o.outputs[0].token_ids for o in llm.generate(PROMPTS, GREEDY)] == expected
            if k:
                assert llm.stats().spec.draft_tokens > 0
        finally:
            llm.shutdown()
