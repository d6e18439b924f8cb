"""Deferred MTP fills on the GPU (marker cuda): under the adaptive policy with --deferred_fill_positions, k = 0
steps stash the target hidden states on the device; drafting catches them up (an eager MTP forward beside the
graphed steps) or drops them. Greedy output equals k = 0's with graphs on (float32; a first divergence must be
a near-tie of the k = 0 run, as in test_cuda_graphs), for the policy's own choices and for forced k = 0
stretches that are caught up and that are dropped."""
import pytest
import torch

from mtpserve import LLM
from test_cuda_graphs import BATCHES, assert_same_or_near_ties, requests

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")]

LONG_ZEROS = [0] * 12 + [2, 1] + [0] * 6 + [3]
SCHEDULES = {"policy": None, "caught up": (LONG_ZEROS, []), "dropped": (LONG_ZEROS, [True] * 12 + [False] * 9)}
ENGINE = dict(devices="cuda:0", dtype="float32", max_cache_blocks=256, max_model_len=512, graph_max_batch=32)


@pytest.fixture(scope="module")
def runs():
    out = {}
    llm = LLM(num_speculative_tokens=0, **ENGINE)
    for batch in BATCHES:
        out["k=0", batch] = llm.generate(*requests(batch))
    llm.shutdown()
    for name, schedule in SCHEDULES.items():
        llm = LLM(num_speculative_tokens=3, speculative_policy="adaptive", deferred_fill_positions=8, **ENGINE)
        if schedule:
            llm.core.engine.force_k_schedule(*schedule)
        for batch in BATCHES:
            out[name, batch] = llm.generate(*requests(batch))
        out[name, "stats"] = llm.stats()
        llm.shutdown()
        torch.cuda.empty_cache()
    return out


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_greedy_with_deferred_fills_equals_k0(runs, name, batch):
    assert_same_or_near_ties(runs["k=0", batch], runs[name, batch], f"deferred fills ({name}) vs k=0, batch={batch}")


def test_the_forced_stretches_defer_catch_up_and_drop(runs):
    caught_up, dropped = runs["caught up", "stats"], runs["dropped", "stats"]
    assert caught_up.fill_skipped_steps > 0 and caught_up.caught_up_positions > 0
    assert dropped.dropped_positions > 0
    assert caught_up.spec.accepted_tokens > 0 and dropped.spec.accepted_tokens > 0
