"""CUDA graphs (marker cuda): decode steps replay graphs captured at start-up, padded to batch buckets.
Greedy output with graphs equals output without them (float32; every first divergence must be a
near-tie of the eager run, since padding changes a GEMM's row count), for k = 0..3 and batches that
hit padded buckets while sequences finish at different lengths; greedy MTP with graphs equals k = 0
with graphs, also where requests join the batch mid-decode (their prefill steps fill the MTP cache through a piecewise
graph and replay the graphs of the draft forwards alone). Steps with prompt tokens replay piecewise graphs, one per
padded row count for the target forward and, with MTP, one for the fill, recorded at start-up, unless
enable_prefill_graph is off."""
import pytest
import torch

from mtpserve import LLM, SamplingParams

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")]

NEAR_TIE = 1e-3
PROMPT_ROW_COUNTS = 116  # the padded row counts up to max_tokens_per_batch (10,240): kernels/row_buckets.h
GRAPH_MEMORY_BOUND = 2**30  # float32 doubles the 176 MiB of bf16; graphs that each kept their own blocks took 3.4 GiB
BATCHES = (3, 13)  # padded to the buckets of 4 and 16
TOPICS = ["the ocean", "a city at night", "learning to cook", "the history of chess", "mountain weather",
          "a small robot", "train travel", "an old library"]


def requests(n: int) -> tuple[list[str], list[SamplingParams]]:
    """Prompts of varied length; varied max_tokens so the batch shrinks through the buckets."""
    prompts = [f"Tell me about {TOPICS[i % len(TOPICS)]}" + ", please" * (i % 4) + f", part {i}." for i in range(n)]
    params = [SamplingParams(temperature=0, max_tokens=24 + 9 * (i % 5), ignore_eos=True, logprobs=2)
              for i in range(n)]
    return prompts, params


@pytest.fixture(scope="module")
def runs():
    out = {}
    for graphs in (True, False):
        for k in range(4):
            llm = LLM(devices="cuda:0", dtype="float32", num_speculative_tokens=k, max_cache_blocks=256,
                      max_model_len=512, enable_graph=graphs, graph_max_batch=32)
            out[graphs, k, "graphs"] = llm.core.engine.num_graphs()
            out[graphs, k, "graph memory"] = llm.core.graph_memory
            for batch in BATCHES:
                out[graphs, k, batch] = llm.generate(*requests(batch))
            out[graphs, k, "graphs after"] = llm.core.engine.num_graphs()
            out[graphs, k, "steps"] = llm.stats().steps
            llm.shutdown()
            torch.cuda.empty_cache()
    return out


def assert_same_or_near_ties(base_outputs, other_outputs, what: str) -> None:
    for base, other in zip(base_outputs, other_outputs):
        want, got = base.outputs[0].token_ids, other.outputs[0].token_ids
        assert len(want) == len(got)
        i = next((i for i, (x, y) in enumerate(zip(want, got)) if x != y), None)
        if i is None:
            continue
        top = sorted(base.outputs[0].logprobs[i].values(), key=lambda lp: -lp.logprob)
        gap = top[0].logprob - top[1].logprob
        assert gap < NEAR_TIE, f"{what}: diverged at token {i} with a top-2 gap of {gap}"
        print(f"\n{what}: near-tie divergence at token {i} (gap {gap:.2e})")


def test_graphs_are_captured_for_every_bucket(runs):
    # Buckets 1, 2, 4, 8, 16, 24, 32: a target graph per query length 1..k + 1, and with MTP a drafting
    # graph per number of recursive forwards 0..k - 1 and one of the recursive forwards alone per number 1..k - 1;
    # then a piecewise graph per padded row count of steps with prompt tokens, and with MTP one of their fills.
    assert runs[True, 0, "graphs"] == 7 + PROMPT_ROW_COUNTS
    for k in (1, 2, 3):
        assert runs[True, k, "graphs"] == 7 * (3 * k) + 2 * PROMPT_ROW_COUNTS
        assert runs[False, k, "graphs"] == 0


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_graphs_share_their_memory(runs, k):
    # The graphs share one pool, recorded on one stream, so together they hold about what the largest needs (the
    # 10,240-row prompt step's). In bf16 on an H200 that was 176 MiB at k = 0; with a stream from torch's pool per
    # recording, where the allocator reuses a freed block only on its own stream, the same graphs held 3,408 MiB.
    assert 0 < runs[True, k, "graph memory"] < GRAPH_MEMORY_BOUND
    assert runs[False, k, "graph memory"] == 0


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_graphs_give_the_eager_output(runs, k, batch):
    assert_same_or_near_ties(runs[False, k, batch], runs[True, k, batch], f"graphs vs eager, k={k} batch={batch}")


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_mtp_with_graphs_equals_no_mtp(runs, k, batch):
    assert_same_or_near_ties(runs[True, 0, batch], runs[True, k, batch], f"graphs, k={k} vs k=0, batch={batch}")


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_serving_captures_no_graph_after_start_up(runs, k):
    assert runs[True, k, "graphs after"] == runs[True, k, "graphs"]
    assert runs[False, k, "graphs after"] == 0


def test_prefill_graphs_off_run_those_steps_eagerly(runs):
    llm = LLM(devices="cuda:0", dtype="float32", num_speculative_tokens=1, max_cache_blocks=256, max_model_len=512,
              graph_max_batch=32, enable_prefill_graph=False)
    captured = llm.core.engine.num_graphs()
    assert captured == 7 * 3
    outputs = llm.generate(*requests(BATCHES[1]))
    assert llm.core.engine.num_graphs() == captured
    llm.shutdown()
    torch.cuda.empty_cache()
    assert_same_or_near_ties(outputs, runs[True, 1, BATCHES[1]], "prefill graphs off vs on, k=1")


def test_mtp_with_graphs_takes_fewer_steps(runs):
    assert runs[True, 2, "steps"] < runs[True, 0, "steps"]


def test_greedy_mtp_equals_no_mtp_where_requests_join_mid_decode():
    # 13 requests, 4 at a time: most steps that admit one also verify the drafts of the others.
    outputs = {}
    for k in (0, 3):
        llm = LLM(devices="cuda:0", dtype="float32", num_speculative_tokens=k, speculative_policy="fixed",
                  max_cache_blocks=256, max_model_len=512, graph_max_batch=32, max_seqs_per_batch=4)
        outputs[k] = llm.generate(*requests(13))
        llm.shutdown()
        torch.cuda.empty_cache()
    assert_same_or_near_ties(outputs[0], outputs[3], "requests joining mid-decode, k=3 vs k=0")
