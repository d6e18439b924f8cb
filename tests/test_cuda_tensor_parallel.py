"""Tensor parallelism over NCCL, one GPU per rank (two real processes): greedy output at TP = 2 equals
TP = 1 in fp32, where any divergence must be a near-tie of the TP = 1 run (an all-reduce of partial sums
rounds differently from one GEMM), and MTP k = 1..3 equals k = 0 at TP = 2 under the same rule; with
CUDA graphs at TP = 2 the output equals the eager output under that rule (and exactly, in bf16 with
--batch_invariant); the same for expert parallelism
(EP = 2, all-to-all over NCCL). The divergences are counted and printed (run with -s)."""
from __future__ import annotations

import os

import pytest
import torch

from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.sampling_params import SamplingParams
from rank_group import one_rank, run_group

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")]

for name in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ.setdefault(name, "0" if name == "NCCL_NVLS_ENABLE" else "1")  # NVLink multicast off

# In fp32 a greedy choice this close to the runner-up (in logprob) may flip when a sum is rounded differently.
NEAR_TIE = 1e-3
PROMPTS = [[(37 * i + 11 * j) % 8000 + 2 for j in range(4 + 5 * i)] for i in range(8)]
GREEDY = SamplingParams(max_tokens=48, temperature=0, ignore_eos=True, logprobs=2)
DEVICES = ["cuda:0", "cuda:1"]


def engine(k: int, graphs: bool = False) -> dict:
    return dict(model=str(DEFAULT_MODEL), dtype="float32", block_size=16, max_cache_blocks=128,
                num_speculative_tokens=k, speculative_policy="fixed", enable_graph=graphs, graph_max_batch=8)


def divergences(got: list[dict], reference: list[dict]) -> list[tuple[int, int, float]]:
    """(prompt, position, the reference's top-2 logprob gap there) of each sequence's first differing token."""
    found = []
    for i, (g, r) in enumerate(zip(got, reference, strict=True)):
        position = next((j for j, (a, b) in enumerate(zip(g["tokens"], r["tokens"])) if a != b), None)
        if position is not None:
            top = sorted(r["logprobs"][position].values(), reverse=True)
            found.append((i, position, top[0] - top[1]))
    return found


def check_near_ties(what: str, got: list[dict], reference: list[dict]) -> None:
    found = divergences(got, reference)
    print(f"{what}: {len(found)} of {len(reference)} sequences diverge: {found}")
    assert all(gap < NEAR_TIE for _, _, gap in found), f"{what}: a divergence that is no near-tie: {found}"


def test_two_gpus_greedy_equals_one_gpu(tmp_path):
    reference = one_rank([engine(0)], PROMPTS, GREEDY, device="cuda:0")[0]
    got = run_group(2, [engine(0)], PROMPTS, GREEDY, tmp_path / "tp2.pt", devices=DEVICES)[0]
    check_near_ties("TP2 vs TP1 (fp32)", got, reference)


def test_mtp_equals_no_mtp_at_tp2(tmp_path):
    runs = run_group(2, [engine(k) for k in range(4)], PROMPTS, GREEDY, tmp_path / "tp2_mtp.pt", devices=DEVICES)
    for k in (1, 2, 3):
        check_near_ties(f"TP2 k={k} vs k=0 (fp32)", runs[k], runs[0])


def test_batch_invariant_mtp_equals_no_mtp_at_tp2_in_bf16(tmp_path):
    """--batch_invariant in bf16 at TP = 2: every rank's kernels are row-invariant and a two-rank all-reduce is
    one addition per element (the same bits in any order), so MTP k = 1..3 equals k = 0 token for token."""
    runs = [dict(engine(k), dtype="bfloat16", batch_invariant=True) for k in range(4)]
    outputs = run_group(2, runs, PROMPTS, GREEDY, tmp_path / "tp2_invariant.pt", devices=DEVICES)
    for k in (1, 2, 3):
        assert [o["tokens"] for o in outputs[k]] == [o["tokens"] for o in outputs[0]], f"k={k}"


def graphs_captured(k: int) -> int:
    """Graphs an engine with k drafts captures over the buckets 1, 2, 4 and 8: in each, a target graph per query
    length 1..k + 1, a drafting graph per recursion count 0..k - 1 and a graph of the recursion alone per count
    1..k - 1."""
    return 4 * ((k + 1) + k + max(k - 1, 0))


def test_batch_invariant_graphs_at_tp2_equal_eager_in_bf16(tmp_path):
    """The same mode with CUDA graphs at TP = 2: 7 prompts replay the bucket of 8 (a padded row), and a padded
    row changes no real row's bits there, so graphs equal eager k = 0 token for token for k = 0..3."""
    runs = [dict(engine(0), dtype="bfloat16", batch_invariant=True)]
    runs += [dict(engine(k, graphs=True), dtype="bfloat16", batch_invariant=True) for k in range(4)]
    outputs, by_run = run_group(2, runs, PROMPTS[:7], GREEDY, tmp_path / "tp2_invariant_graphs.pt", devices=DEVICES,
                                with_groups=True)
    eager = [o["tokens"] for o in outputs[0]]
    for k in range(4):
        assert by_run[1 + k]["graphs"] == graphs_captured(k), by_run[1 + k]
        assert [o["tokens"] for o in outputs[1 + k]] == eager, f"graphs, k={k}"


def test_expert_parallel_on_two_gpus_equals_one_gpu(tmp_path):
    reference = one_rank([engine(0)], PROMPTS, GREEDY, device="cuda:0")[0]
    runs = run_group(2, [engine(0), engine(2)], PROMPTS, GREEDY, tmp_path / "ep2.pt", devices=DEVICES, ep_size=2)
    check_near_ties("EP2 vs TP1 (fp32)", runs[0], reference)
    check_near_ties("EP2 k=2 vs k=0 (fp32)", runs[1], runs[0])


def test_graphs_at_tp2_give_the_eager_output(tmp_path):
    """Every rank captures the graphs rank 0 captures and replays the one rank 0 replays (7 prompts pad to
    the bucket of 8); padding changes a GEMM's row count, so a divergence must be a near-tie (fp32)."""
    runs = [engine(k, graphs) for k in range(4) for graphs in (False, True)]
    outputs, by_run = run_group(2, runs, PROMPTS[:7], GREEDY, tmp_path / "tp2_graphs.pt", devices=DEVICES,
                                with_groups=True)
    for k in range(4):
        eager, graphed = 2 * k, 2 * k + 1
        assert by_run[eager]["graphs"] == 0 and by_run[graphed]["graphs"] == graphs_captured(k)
        check_near_ties(f"TP2 graphs vs eager, k={k} (fp32)", outputs[graphed], outputs[eager])
        if k:
            check_near_ties(f"TP2 graphs, k={k} vs k=0 (fp32)", outputs[graphed], outputs[1])
