"""A request stream whose consumer falls behind the engine (many streams on one event loop) takes every output
already queued as one delta: fewer, larger chunks, the same tokens and text as a consumer that keeps up."""
import asyncio
import time

import pytest

from conftest import write_tiny_model

from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.async_engine import AsyncEngine

ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=64)
PROMPT = [5, 17, 42, 8, 99, 23]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(write_tiny_model(tmp_path_factory.mktemp("tiny_stream"))),
                                               **ENGINE)))
    yield engine
    engine.shutdown()


async def deltas(stream) -> list:
    return [delta async for delta in stream]


async def all_queued(stream, timeout_s: float = 60.0) -> None:
    """Waits, without consuming, until the stream's final output has been queued for it."""
    deadline = time.monotonic() + timeout_s
    while stream._queue.empty() or not stream._queue._queue[-1].finished:
        assert time.monotonic() < deadline, "timed out waiting for the request to finish"
        await asyncio.sleep(0.01)


def prompt_and_late(engine, params: SamplingParams) -> tuple[list, list]:
    """The deltas of a stream read as they come, and of the same request read only once it has finished."""
    async def run():
        prompt = await deltas(engine.add_request(PROMPT, params))
        late = engine.add_request(PROMPT, params)
        await all_queued(late)
        return prompt, await deltas(late)
    return asyncio.run(run())


def test_a_consumer_that_falls_behind_gets_the_queued_outputs_as_one_delta(engine):
    prompt, late = prompt_and_late(engine, SamplingParams(temperature=0, max_tokens=16, ignore_eos=True))
    assert len(prompt) > 1 and len(late) == 1
    assert late[0].token_ids == [t for d in prompt for t in d.token_ids] and len(late[0].token_ids) == 16
    assert late[0].text == "".join(d.text for d in prompt) and late[0].finished


def test_a_stop_string_still_ends_the_text_where_it_completes(engine):
    free, _ = prompt_and_late(engine, SamplingParams(temperature=0, max_tokens=16, ignore_eos=True))
    text = "".join(d.text for d in free)
    stop = text[len(text) // 2:len(text) // 2 + 2]
    assert stop.strip(), f"the greedy text {text!r} has no usable stop string at its middle"
    prompt, late = prompt_and_late(engine, SamplingParams(temperature=0, max_tokens=16, ignore_eos=True, stop=[stop]))
    assert len(late) == 1 and late[0].state.finish_reason == "stop"
    assert late[0].text == "".join(d.text for d in prompt) == text[:text.index(stop)]


def test_logprobs_and_counters_taken_together_equal_those_taken_one_by_one(engine):
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, logprobs=2)
    prompt, late = prompt_and_late(engine, params)
    assert len(prompt) > 1 and len(late) == 1
    assert late[0].logprobs == [entry for d in prompt for entry in d.logprobs] and len(late[0].logprobs) == 12
    one_by_one, together = prompt[-1].state, late[0].state
    assert together.cumulative_logprob == pytest.approx(one_by_one.cumulative_logprob)
    assert (together.finish_reason, together.text, together.metrics.steps_by_k) == (
        one_by_one.finish_reason, one_by_one.text, one_by_one.metrics.steps_by_k)
