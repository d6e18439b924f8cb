"""Expert parallelism over gloo (--ep_size = --nnodes): each rank holds its share of the routed experts
whole and reaches the others through all-to-all dispatch and combine. Greedy output equals one rank's
(k = 0), and MTP k = 1..3 equals it too, at EP = 2 and 4, on a random model with 8 routed experts, on
one whose routing sends every token to rank 0's experts, and on the embedded model."""
from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from conftest import write_tiny_model
from mtpserve import LLM, distributed
from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.expert_stacks import ExpertStacks
from mtpserve.model_loader import load_model
from mtpserve.sampling_params import SamplingParams
from mtpserve.launch import free_port_pair
from rank_group import one_rank, run_group
from test_tensor_parallel import forwards, tp_rank

PROMPTS = [[5, 17, 42, 99, 3, 64, 7], [11, 12], [300, 2, 250, 8, 9, 10, 11, 12, 13, 14, 15], [77]]
GREEDY = SamplingParams(max_tokens=14, temperature=0, ignore_eos=True)


def engine(model_dir, k: int) -> dict:
    return dict(model=str(model_dir), dtype="float32", block_size=8, max_cache_blocks=48, num_speculative_tokens=k,
                speculative_policy="fixed")


@pytest.fixture(scope="module")
def skewed_model_dir(tmp_path_factory):
    """The tiny model's 8 experts in 2 groups, with correction biases that make group 0 (experts 0..3, rank 0's
    under EP = 2) win for every token of every MoE layer, the MTP layer's included."""
    path = write_tiny_model(tmp_path_factory.mktemp("skewed"))
    tensors = load_file(path / "model.safetensors")
    for name, t in tensors.items():
        if name.endswith("e_score_correction_bias"):
            tensors[name] = torch.tensor([5.0] * 4 + [-5.0] * 4, dtype=t.dtype)
    save_file(tensors, str(path / "model.safetensors"))
    return path


def tokens(outputs: list[dict]) -> list[list[int]]:
    return [o["tokens"] for o in outputs]


@pytest.mark.parametrize("world, model, ks", [
    (2, "tiny", (0, 1, 2, 3)),
    (2, "skewed", (0, 1, 3)),
    (4, "tiny", (0, 2)),
    (2, "embedded", (0, 1, 2, 3)),
])
def test_expert_parallel_greedy_equals_one_rank(world, model, ks, tiny_model_dir, skewed_model_dir, tmp_path):
    model_dir = {"tiny": tiny_model_dir, "skewed": skewed_model_dir, "embedded": DEFAULT_MODEL}[model]
    prompts = [[t % 400 for t in p] for p in PROMPTS]
    expected = tokens(one_rank([engine(model_dir, 0)], prompts, GREEDY)[0])
    got = run_group(world, [engine(model_dir, k) for k in ks], prompts, GREEDY, tmp_path / "ep.pt", ep_size=world)
    for k, outputs in zip(ks, got):
        assert tokens(outputs) == expected, f"EP={world}, k={k}"



def test_expert_parallel_hidden_states_and_logits_match_one_rank(skewed_model_dir, tmp_path):
    """Every token's experts on rank 0: rank 1 computes none and still meets every collective."""
    expected = forwards(load_model(skewed_model_dir, "float32", with_mtp=True))
    out_file = tmp_path / "ep2.pt"
    mp.spawn(tp_rank, args=(free_port_pair(), str(skewed_model_dir), str(out_file), 2), nprocs=2, join=True)
    for g, e in zip(torch.load(out_file), expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def test_each_rank_stacks_only_its_experts():
    names = [f"model.layers.1.mlp.experts.{e}.{kind}.weight" for e in range(8)
             for kind in ("gate_proj", "up_proj", "down_proj")] + ["model.layers.1.mlp.gate.weight"]
    stacks = ExpertStacks(names, ep_rank=1, ep_size=2)
    assert [n for n in names if stacks.wanted(n)] == names[12:]
    assert stacks.place(names[12], torch.ones(4, 6))  # expert 4's gate rows: the first of rank 1's 4 experts
    assert stacks.stacks["model.layers.1.mlp.experts.gate_up_proj"].shape == (4, 8, 6)
    with pytest.raises(ValueError, match="--ep_size=3 does not divide the 8 routed experts of model.layers.1.mlp"):
        ExpertStacks(names, ep_rank=0, ep_size=3)


def test_one_rank_refuses_expert_parallelism(tiny_model_dir):
    with pytest.raises(ValueError, match="ep_size=2 needs 2 ranks"):
        LLM(str(tiny_model_dir), ep_size=2, max_cache_blocks=8)
    with pytest.raises(ValueError, match="--ep_size=3 with --nnodes 2"):
        distributed.init_tensor_parallel(0, 2, "127.0.0.1:1", ep_size=3)
