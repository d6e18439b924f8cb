"""The CUDA MoE kernels (marker cuda) against the CPU kernels of the same interface: noaux_tc routing on
DeepSeek-V3's dims and the tiny model's with a random non-zero correction bias, and the routed experts
in bf16 (expert GEMVs for one token, and up to 64 assignments off Hopper; grouped GEMMs beyond: our wgmma kernel
on Hopper up to 8 rows per expert on average, torch._grouped_mm past that; --batch_invariant's GEMVs at every
size),
fp16 and fp32 (every expert), including skewed routing and 1 and 300 tokens."""
import pytest
import torch

from mtpserve import _C

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")]

# (experts, n_group, topk_group, top_k)
REAL = (256, 8, 4, 8)
TINY = (16, 4, 2, 4)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def by_expert(weights: torch.Tensor, experts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's (weights, experts) sorted by expert id: the CPU reference's topk is unsorted."""
    order = experts.argsort(dim=1)
    return weights.gather(1, order), experts.gather(1, order)


@pytest.mark.parametrize("dims", [REAL, TINY], ids=["real", "tiny"])
@pytest.mark.parametrize("tokens", [1, 7, 300])
@pytest.mark.parametrize("norm_topk_prob", [True, False])
def test_route_noaux_tc(dims, tokens, norm_topk_prob):
    experts, n_group, topk_group, top_k = dims
    logits = torch.randn(tokens, experts, generator=gen(tokens))
    bias = 0.1 * torch.randn(experts, generator=gen(1))
    args = (n_group, topk_group, top_k, norm_topk_prob, 2.5)
    gpu_w, gpu_e = _C.route_noaux_tc(logits.cuda(), bias.cuda(), *args)
    cpu_w, cpu_e = _C.route_noaux_tc(logits, bias, *args)
    assert gpu_w.dtype == torch.float32 and gpu_e.dtype == torch.int64
    gpu_w, gpu_e = by_expert(gpu_w.cpu(), gpu_e.cpu())
    cpu_w, cpu_e = by_expert(cpu_w, cpu_e)
    # Random fp32 scores have no ties within the few-ulp differences of exp: the same experts.
    assert torch.equal(gpu_e, cpu_e)
    # The sigmoid's exp and the order of the normalising sum may differ in the last fp32 bits.
    torch.testing.assert_close(gpu_w, cpu_w, rtol=1e-5, atol=1e-7)


def test_route_orders_by_biased_score():
    logits = torch.randn(5, 256, generator=gen(2)).cuda()
    bias = (0.1 * torch.randn(256, generator=gen(3))).cuda()
    _, experts = _C.route_noaux_tc(logits, bias, 8, 4, 8, True, 2.5)
    choice = logits.sigmoid() + bias
    picked = choice.gather(1, experts)
    assert (picked[:, :-1] >= picked[:, 1:]).all()


def test_route_breaks_ties_to_the_lower_index():
    # All-equal logits and bias: every group ties, and so does every expert; torch.topk's order wins.
    logits = torch.zeros(2, 16).cuda()
    weights, experts = _C.route_noaux_tc(logits, torch.zeros(16).cuda(), 4, 2, 4, True, 1.0)
    assert experts.tolist() == [[0, 1, 2, 3]] * 2
    torch.testing.assert_close(weights.cpu(), torch.full((2, 4), 0.25))


def expert_weights(experts: int, hidden: int, inter: int, dtype: torch.dtype, seed: int):
    gate_up = torch.randn(experts, 2 * inter, hidden, generator=gen(seed)) / hidden**0.5
    down = torch.randn(experts, hidden, inter, generator=gen(seed + 1)) / inter**0.5
    return gate_up.to(dtype), down.to(dtype)


def random_routing(tokens: int, experts: int, top_k: int, seed: int):
    chosen = torch.rand(tokens, experts, generator=gen(seed)).argsort(dim=1)[:, :top_k]
    weights = torch.rand(tokens, top_k, generator=gen(seed + 1)) + 0.1
    return weights, chosen


def skewed_routing(tokens: int, experts: int, top_k: int, seed: int):
    # Every token picks the same experts (expert 3 first): the others get no rows at all.
    chosen = torch.tensor([3] + [e for e in range(experts) if e != 3][: top_k - 1]).repeat(tokens, 1)
    weights = torch.rand(tokens, top_k, generator=gen(seed)) + 0.1
    return weights, chosen


def run_both(x, gate_up, down, weights, chosen, dtype):
    gpu = _C.moe_experts(x.to(dtype).cuda(), gate_up.cuda(), down.cuda(), weights.cuda(), chosen.cuda())
    # fp32 reference: the CPU kernel on upcast copies.
    ref = _C.moe_experts(x.to(dtype).float(), gate_up.float(), down.float(), weights, chosen)
    return gpu, ref


# bf16/fp16 round the gate_up output, the activation, h and y to 8 (11) significant bits on the way,
# each a relative 2^-9 (2^-12) at the output's scale, and cuBLAS may reduce fp16 in fp16; fp32 differs
# only in the GEMMs' accumulation order (no TF32 on either side).
MOE_TOL = {torch.bfloat16: 3e-2, torch.float16: 1e-2, torch.float32: 1e-4}

SHAPES = [  # experts, hidden, inter, top_k
    (16, 80, 24, 4),      # tiny model: grouped GEMMs take 80 and 24 (multiples of 8)
    (16, 80, 20, 4),      # inter 20: not a 16-byte row, so bf16 computes every expert
    (8, 7168, 64, 8),     # DeepSeek's hidden, few experts so the CPU reference stays quick
    (64, 80, 24, 8),      # 64 experts, top-8
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("tokens", [1, 4, 16, 300])
@pytest.mark.parametrize("shape", SHAPES, ids=["tiny", "inter20", "hidden7168", "experts64"])
@pytest.mark.parametrize("routing", [random_routing, skewed_routing], ids=["random", "skewed"])
def test_moe_experts(dtype, tokens, shape, routing):
    experts, hidden, inter, top_k = shape
    gate_up, down = expert_weights(experts, hidden, inter, dtype, seed=tokens)
    x = torch.randn(tokens, hidden, generator=gen(5))
    weights, chosen = routing(tokens, experts, top_k, seed=6)
    gpu, ref = run_both(x, gate_up, down, weights, chosen, dtype)
    assert gpu.dtype == dtype and gpu.shape == (tokens, hidden)
    err = (gpu.cpu().float() - ref).abs().max().item()
    assert err <= MOE_TOL[dtype] * ref.abs().max().item(), err


def hopper() -> bool:
    return torch.cuda.get_device_capability() == (9, 0)


def few_rows_case(tokens: int, routing):
    """64 experts, hidden 256, inter 128, top-8: the MoE inputs of `tokens` tokens and their CPU reference."""
    experts, hidden, inter, top_k, dtype = 64, 256, 128, 8, torch.bfloat16
    gate_up, down = expert_weights(experts, hidden, inter, dtype, seed=tokens)
    x = torch.randn(tokens, hidden, generator=gen(5))
    weights, chosen = routing(tokens, experts, top_k, seed=6)
    return run_both(x, gate_up, down, weights, chosen, dtype)


@pytest.mark.parametrize("tokens", [2, 9, 40, 64])
@pytest.mark.parametrize("routing", [random_routing, skewed_routing], ids=["random", "skewed"])
def test_expert_gemm_kernel_at_a_few_rows_per_expert(tokens, routing):
    """16 to 512 assignments, at most 8 per expert on average: on a Hopper GPU the wgmma expert GEMMs. Skewed
    routing gives 8 experts 40 or 64 rows each: several passes of 32 rows per expert, the last one partial, and
    rows past the input's end."""
    gpu, ref = few_rows_case(tokens, routing)
    err = (gpu.cpu().float() - ref).abs().max().item()
    assert err <= MOE_TOL[torch.bfloat16] * ref.abs().max().item(), err


@pytest.mark.parametrize("tokens,ours", [(1, False), (9, True), (300, False)])
def test_which_steps_run_the_expert_gemm_kernel(tokens, ours):
    """On Hopper, 2 tokens to 8 rows per expert on average take the wgmma kernel; one token takes the GEMVs and
    300 tokens x top-8 over 64 experts torch._grouped_mm. Elsewhere the kernel never runs."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        few_rows_case(tokens, random_routing)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not kernels:
        pytest.skip("the profiler recorded no kernels (another tool holds CUPTI, as compute-sanitizer does)")
    ran = any("expert_gemm_kernel" in name for name in kernels)
    assert ran == (ours and hopper()), kernels


def test_batch_invariant_experts_give_each_token_the_same_bits_in_any_split():
    """--batch_invariant at hidden 256, inter 128: on Hopper in bf16 our expert GEMMs at every size (1,100 tokens x
    top-8 take two launches of at most 8,192 assignments), the GEMVs elsewhere. A token's bits are the same
    alone, in any slice of the batch and in the whole batch, across the launch boundary too."""
    gate_up, down = (t.cuda() for t in expert_weights(64, 256, 128, torch.bfloat16, seed=23))
    x = torch.randn(1100, 256, generator=gen(24)).bfloat16()
    weights, chosen = random_routing(1100, 64, 8, seed=25)
    moe = _C.batch_invariant.moe_experts
    together = moe(x.cuda(), gate_up, down, weights.cuda(), chosen.cuda())
    for first, last in ((0, 1), (1, 3), (5, 37), (1023, 1025), (1099, 1100), (300, 900)):
        part = moe(x[first:last].cuda(), gate_up, down, weights[first:last].cuda(), chosen[first:last].cuda())
        assert torch.equal(part, together[first:last]), (first, last)
    ref = _C.moe_experts(x.float(), gate_up.cpu().float(), down.cpu().float(), weights, chosen)
    err = (together.cpu().float() - ref).abs().max().item()
    assert err <= MOE_TOL[torch.bfloat16] * ref.abs().max().item(), err


@pytest.mark.parametrize("routing", [random_routing, skewed_routing], ids=["random", "skewed"])
def test_batch_invariant_expert_gemvs_at_many_tokens(routing):
    # --batch_invariant runs the GEMVs at every size: 300 tokens x top-8 take two grouped launches (2048
    # assignments each at most).
    gate_up, down = expert_weights(64, 80, 24, torch.bfloat16, seed=20)
    x = torch.randn(300, 80, generator=gen(21)).bfloat16()
    weights, chosen = routing(300, 64, 8, seed=22)
    gpu = _C.batch_invariant.moe_experts(x.cuda(), gate_up.cuda(), down.cuda(), weights.cuda(), chosen.cuda())
    ref = _C.moe_experts(x.float(), gate_up.float(), down.float(), weights, chosen)
    err = (gpu.cpu().float() - ref).abs().max().item()
    assert err <= MOE_TOL[torch.bfloat16] * ref.abs().max().item(), err


def test_moe_experts_matches_the_cpu_kernel_in_bf16():
    # Against the CPU kernel in the same dtype (its own bf16 roundings): within a few bf16 ulps.
    gate_up, down = expert_weights(16, 80, 24, torch.bfloat16, seed=7)
    x = torch.randn(300, 80, generator=gen(8)).bfloat16()
    weights, chosen = random_routing(300, 16, 4, seed=9)
    gpu = _C.moe_experts(x.cuda(), gate_up.cuda(), down.cuda(), weights.cuda(), chosen.cuda()).cpu().float()
    cpu = _C.moe_experts(x, gate_up, down, weights, chosen).float()
    assert (gpu - cpu).abs().max().item() <= 3e-2 * cpu.abs().max().item()


def test_moe_experts_is_deterministic():
    # Stable grouping and a k-ordered fp32 combine, no atomics: the same bits on every run.
    gate_up, down = (t.cuda() for t in expert_weights(16, 80, 24, torch.bfloat16, seed=10))
    x = torch.randn(300, 80, generator=gen(11)).bfloat16().cuda()
    weights, chosen = (t.cuda() for t in random_routing(300, 16, 4, seed=12))
    first = _C.moe_experts(x, gate_up, down, weights, chosen)
    for _ in range(3):
        assert torch.equal(_C.moe_experts(x, gate_up, down, weights, chosen), first)


def test_routing_then_experts_end_to_end():
    # The model's order: fp32 router logits, routing, experts; the routing's output feeds the experts.
    experts, n_group, topk_group, top_k = TINY
    gate_up, down = expert_weights(experts, 80, 24, torch.float32, seed=13)
    x = torch.randn(37, 80, generator=gen(14))
    gate = torch.randn(experts, 80, generator=gen(15)) / 80**0.5
    bias = 0.1 * torch.randn(experts, generator=gen(16))
    outs = []
    for device in ("cuda", "cpu"):
        w, e = _C.route_noaux_tc(torch.nn.functional.linear(x.to(device), gate.to(device)), bias.to(device),
                                 n_group, topk_group, top_k, True, 2.5)
        outs.append(_C.moe_experts(x.to(device), gate_up.to(device), down.to(device), w, e).cpu())
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("experts,tokens,moe_experts",
                         [(16, 4, _C.moe_experts), (64, 24, _C.batch_invariant.moe_experts)], ids=["grouped-in-blocks", "grouped-first"])
def test_expert_gemvs_give_each_token_the_same_bits_in_any_batch(experts, tokens, moe_experts):
    # The experts run as per-row GEMVs: a token's result is its own, whatever else is in the step, and
    # whether the step's blocks group its few assignments (up to 64: both tables) or launch_group groups its
    # many (--batch_invariant's table): a token alone takes the first way.
    gate_up, down = (t.cuda() for t in expert_weights(experts, 80, 24, torch.bfloat16, seed=17))
    x = torch.randn(tokens, 80, generator=gen(18)).bfloat16().cuda()
    weights, chosen = (t.cuda() for t in random_routing(tokens, experts, 4 if experts == 16 else 8, seed=19))
    together = moe_experts(x, gate_up, down, weights, chosen)
    for t in range(tokens):
        alone = moe_experts(x[t:t + 1], gate_up, down, weights[t:t + 1], chosen[t:t + 1])
        assert torch.equal(alone, together[t:t + 1])
