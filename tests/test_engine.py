"""The engine end to end through mtpserve.LLM (greedy unless said): batching, chunked prefill,
prefix caching, preemption, seeds, stops, aborts and bad input."""
import random

import pytest
import torch

from mtpserve import LLM
from mtpserve.sampling_params import SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)


def prompts(n, seed=0, low=3, high=60):
    rng = random.Random(seed)
    return [[rng.randrange(4, 400) for _ in range(rng.randrange(low, high))] for _ in range(n)]


def tokens(outputs):
    return [o.outputs[0].token_ids for o in outputs]


@pytest.fixture(scope="module")
def llm(tiny_model_dir):
    engine = LLM(str(tiny_model_dir), dtype="float32", block_size=8, max_cache_blocks=512)
    yield engine
    engine.shutdown()


def assert_all_blocks_free(llm):
    assert llm.stats().kv_usage == 0.0


def test_batch_equals_each_prompt_alone(llm):
    batch = prompts(16)
    together = tokens(llm.generate(batch, GREEDY))
    alone = [tokens(llm.generate([p], GREEDY))[0] for p in batch]
    assert together == alone
    assert all(len(t) == GREEDY.max_tokens for t in together)
    assert_all_blocks_free(llm)


@pytest.mark.parametrize("option", ["enable_chunked_prefill", "enable_prefix_cache"])
def test_engine_options_do_not_change_outputs(tiny_model_dir, llm, option):
    batch = prompts(8, seed=1, low=20, high=90)
    # A 32-token budget splits every long prompt into chunks mixed with other requests' decodes.
    off = LLM(str(tiny_model_dir), dtype="float32", block_size=8, max_cache_blocks=512,
              max_tokens_per_batch=32 if option == "enable_chunked_prefill" else 10240, **{option: False})
    on = LLM(str(tiny_model_dir), dtype="float32", block_size=8, max_cache_blocks=512, max_tokens_per_batch=32)
    try:
        assert tokens(on.generate(batch, GREEDY)) == tokens(off.generate(batch, GREEDY)) == tokens(
            llm.generate(batch, GREEDY))
        assert_all_blocks_free(on)
        assert_all_blocks_free(off)
    finally:
        on.shutdown()
        off.shutdown()


def test_prefix_cache_hits_are_counted_and_exact(llm):
    shared = prompts(1, seed=2, low=40, high=41)[0]
    batch = [shared + tail for tail in prompts(4, seed=3, low=2, high=9)]
    first = llm.generate(batch[:1], GREEDY)[0]
    before = llm.stats().prefix_hits
    rest = llm.generate(batch[1:], GREEDY)
    assert llm.stats().prefix_hits - before >= 3 * 40 // 8 * 8
    assert all(o.metrics.num_cached_tokens >= 40 // 8 * 8 for o in rest)
    assert tokens([first] + rest) == [tokens(llm.generate([p], GREEDY))[0] for p in batch]


def test_preemption_keeps_outputs_identical(tiny_model_dir, llm):
    batch = prompts(12, seed=4, low=10, high=30)
    params = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    # 24 blocks of 8 cannot hold 12 sequences of ~60 tokens: running ones get preempted.
    small = LLM(str(tiny_model_dir), dtype="float32", block_size=8, max_cache_blocks=24)
    try:
        assert tokens(small.generate(batch, params)) == tokens(llm.generate(batch, params))
        assert small.stats().preemptions > 0
        assert_all_blocks_free(small)
    finally:
        small.shutdown()


def test_seeded_sampling_is_independent_of_batch(llm):
    batch = prompts(6, seed=5)
    seeded = [SamplingParams(temperature=1.0, top_p=0.9, seed=100 + i, max_tokens=20, ignore_eos=True)
              for i in range(len(batch))]
    together = tokens(llm.generate(batch, seeded))
    alone = [tokens(llm.generate([p], s))[0] for p, s in zip(batch, seeded)]
    reversed_batch = tokens(llm.generate(batch[::-1], seeded[::-1]))[::-1]
    assert together == alone == reversed_batch
    unseeded = SamplingParams(temperature=1.0, max_tokens=20, ignore_eos=True)
    assert len({tuple(t) for t in tokens(llm.generate(batch[:1] * 4, unseeded))}) > 1


def test_top_k_one_equals_greedy(llm):
    batch = prompts(5, seed=6)
    top1 = SamplingParams(temperature=0.8, top_k=1, max_tokens=24, ignore_eos=True)
    assert tokens(llm.generate(batch, top1)) == tokens(llm.generate(batch, GREEDY))


def test_max_tokens_and_stop_token_end_at_the_right_token(llm):
    prompt = prompts(1, seed=7)[0]
    reference = tokens(llm.generate([prompt], SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)))[0]
    short = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=7, ignore_eos=True))[0].outputs[0]
    assert short.token_ids == reference[:7] and short.finish_reason == "length"
    stop_at = next(i for i in range(5, 30) if reference[i] not in reference[:i])
    stopped = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=30, ignore_eos=True,
                                                    stop_token_ids=[reference[stop_at]]))[0].outputs[0]
    assert stopped.token_ids == reference[:stop_at + 1]
    assert (stopped.finish_reason, stopped.stop_reason) == ("stop", reference[stop_at])


def test_stop_string_ends_at_the_token_that_completes_it(llm):
    prompt = prompts(1, seed=8)[0]
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
    full = llm.generate([prompt], params)[0].outputs[0]
    text = full.text
    stop = text[len(text) // 2: len(text) // 2 + 3]
    assert stop, "the random model produced too little text for this test"
    cut = text.index(stop)
    out = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, stop=[stop]))[0]
    completion = out.outputs[0]
    assert completion.text == text[:cut]
    assert (completion.finish_reason, completion.stop_reason) == ("stop", stop)
    n = len(completion.token_ids)
    assert completion.token_ids == full.token_ids[:n]
    decoded_before = llm.tokenizer.decode(full.token_ids[:n - 1])
    assert stop not in decoded_before and stop in llm.tokenizer.decode(full.token_ids[:n])
    assert_all_blocks_free(llm)


def test_abort_mid_generation_frees_blocks(llm):
    engine = llm.core.engine
    engine.add_request("to-abort", prompts(1, seed=9)[0], SamplingParams(temperature=0, max_tokens=200,
                                                                         ignore_eos=True).to_cpp())
    seen = []
    while len(seen) < 3:
        seen += [o for o in engine.get_outputs(1.0) if o.request_id == "to-abort"]
    assert llm.stats().kv_usage > 0
    engine.abort("to-abort")
    while not any(o.finished for o in seen):
        seen += [o for o in engine.get_outputs(1.0) if o.request_id == "to-abort"]
    assert seen[-1].finish_reason == "abort"
    assert_all_blocks_free(llm)


def test_a_batch_is_admitted_together_and_its_first_step_prefills_all_of_it(llm):
    before = llm.stats().steps
    outputs = llm.generate(prompts(12, seed=13, high=12), SamplingParams(temperature=0, max_tokens=1))
    assert [len(t) for t in tokens(outputs)] == [1] * 12
    assert llm.stats().steps - before == 1


def test_add_requests_queues_all_or_none(llm):
    engine, ok = llm.core.engine, SamplingParams(temperature=0, max_tokens=2, ignore_eos=True).to_cpp()
    with pytest.raises(ValueError, match="request 'bad': the prompt is empty"):
        engine.add_requests([("first", [5, 6], ok), ("bad", [], ok)])
    with pytest.raises(ValueError, match="'twice' is given twice"):
        engine.add_requests([("twice", [5, 6], ok), ("twice", [7], ok)])
    engine.add_requests([("first", [5, 6], ok), ("twice", [7], ok)])  # neither id was taken
    finished = set()
    while finished != {"first", "twice"}:
        finished |= {o.request_id for o in engine.get_outputs(1.0) if o.finished}
    assert_all_blocks_free(llm)


@pytest.mark.parametrize("prompt, params, message", [
    ([], {}, "prompt is empty"),
    ([5] * 300, {}, "max_model_len is 256"),
    ([5, 6], {"max_tokens": 0}, "max_tokens"),
    ([5, 6], {"temperature": -0.5}, "temperature"),
    ([5, 6], {"top_p": 1.5}, "top_p"),
    ([5, 6], {"top_p": 0.0}, "top_p"),
    ([5, 6], {"stop": [3]}, "unknown stop type"),
    ([5, 999], {}, "outside the vocabulary"),
])
def test_bad_input_is_refused_and_the_engine_keeps_serving(llm, prompt, params, message):
    with pytest.raises(ValueError, match=message):
        llm.generate([prompts(1)[0], prompt], SamplingParams(**{"max_tokens": 4, **params}))
    assert len(llm.generate(prompts(2, seed=10), GREEDY)) == 2
    assert_all_blocks_free(llm)


@torch.no_grad()
def test_greedy_generation_matches_transformers(tiny_model_dir, llm):
    from checkpoints import load_reference
    reference, _ = load_reference(tiny_model_dir)
    for prompt in prompts(3, seed=12):
        expected = reference.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False,
                                      eos_token_id=None, pad_token_id=0)[0, len(prompt):].tolist()
        assert tokens(llm.generate([prompt], SamplingParams(temperature=0, max_tokens=32, ignore_eos=True))) == [
            expected]
