"""/metrics of a real server running MTP (num_speculative_tokens=1, fixed policy): Prometheus text that
prometheus_client's parser reads, engine-exact counters, latency histograms, finish reasons."""
import asyncio
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mtpserve.client import Client
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer

MODEL = "tiny-mtp"


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(tiny_model_dir), dtype="float32", block_size=8,
                                               max_cache_blocks=256, num_speculative_tokens=1,
                                               speculative_policy="fixed")))
    server = BackgroundServer(build_app(engine, MODEL)).start()
    with Client(server.url, timeout=30) as client:
        yield client, engine
    server.stop()
    engine.shutdown()


def scrape(client) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels without model_name): value} of one scrape."""
    samples = {}
    for family in text_string_to_metric_families(client.metrics()):
        assert family.name.startswith("mtpserve:"), family.name
        for s in family.samples:
            labels = dict(s.labels)
            assert labels.pop("model_name") == MODEL
            samples[(s.name, tuple(sorted(labels.items())))] = s.value
    return samples


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def wait_idle(engine, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while engine.stats().kv_usage != 0 or engine.stats().running != 0 or engine.num_open_streams != 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_metrics_parse_and_have_the_expected_families(served):
    client, _ = served
    samples = scrape(client)
    names = {name for name, _ in samples}
    for name in ("mtpserve:num_requests_running", "mtpserve:num_requests_waiting", "mtpserve:kv_cache_usage_perc",
                 "mtpserve:prompt_tokens_total", "mtpserve:generation_tokens_total",
                 "mtpserve:prefix_cache_queries_total", "mtpserve:prefix_cache_hits_total",
                 "mtpserve:spec_decode_num_drafts_total", "mtpserve:spec_decode_num_draft_tokens_total",
                 "mtpserve:spec_decode_num_accepted_tokens_total", "mtpserve:request_success_total",
                 "mtpserve:time_to_first_token_seconds_count", "mtpserve:time_per_output_token_seconds_count",
                 "mtpserve:e2e_request_latency_seconds_count", "mtpserve:num_preemptions_total"):
        assert name in names, name
    for reason in ("stop", "length", "abort", "error"):
        assert ("mtpserve:request_success_total", (("finished_reason", reason),)) in samples


def test_counters_move_with_requests_and_match_the_engine(served):
    client, engine = served
    before = scrape(client)
    out = client.completions([7, 8, 9, 10, 11], max_tokens=20, temperature=0, ignore_eos=True)
    assert out.usage.completion_tokens == 20
    wait_idle(engine)
    after = scrape(client)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("mtpserve:prompt_tokens_total") == 5
    assert delta("mtpserve:generation_tokens_total") == 20
    assert delta("mtpserve:request_success_total", finished_reason="length") == 1
    for histogram in ("time_to_first_token_seconds", "time_per_output_token_seconds", "e2e_request_latency_seconds"):
        assert delta(f"mtpserve:{histogram}_count") == 1
        assert delta(f"mtpserve:{histogram}_sum") > 0
    # Speculative decoding: every decode step after the prefill verifies one draft.
    drafts = delta("mtpserve:spec_decode_num_drafts_total")
    assert drafts > 0 and delta("mtpserve:spec_decode_num_draft_tokens_total") == drafts
    accepted = delta("mtpserve:spec_decode_num_accepted_tokens_total")
    assert 0 <= accepted <= drafts
    assert value(after, "mtpserve:spec_decode_num_accepted_tokens_per_pos_total", position="0") == value(
        after, "mtpserve:spec_decode_num_accepted_tokens_total")
    # Each verify step emits accepted + 1 tokens, all after the prefill's first token.
    assert drafts + accepted <= 20 - 1
    # Engine-wide values are the engine's own.
    stats = engine.stats()
    assert value(after, "mtpserve:spec_decode_num_draft_tokens_total") == stats.spec.draft_tokens
    assert value(after, "mtpserve:generation_tokens_total") == stats.generation_tokens
    assert value(after, "mtpserve:num_requests_running") == 0 and value(after, "mtpserve:kv_cache_usage_perc") == 0


def test_engine_step_time_is_exported_with_the_steps_that_computed_prompts(served):
    client, engine = served
    wait_idle(engine)
    before, started = scrape(client), time.monotonic()
    client.completions([3, 4, 5, 6], max_tokens=12, temperature=0, ignore_eos=True)
    wait_idle(engine)
    after, elapsed = scrape(client), time.monotonic() - started

    def delta(name):
        return value(after, name) - value(before, name)

    assert delta("mtpserve:engine_prompt_steps_total") == 1  # one short prompt: one prefill step
    assert delta("mtpserve:engine_steps_total") >= 12 // 2  # at most two tokens a step at k = 1
    step_s, prompt_s = delta("mtpserve:engine_step_seconds_total"), delta("mtpserve:engine_prompt_step_seconds_total")
    assert 0 < prompt_s < step_s <= elapsed
    assert value(after, "mtpserve:engine_step_seconds_total") == engine.stats().step_seconds
    # Each step's target forward and its sampling lie within the step.
    assert 0 < delta("mtpserve:engine_target_seconds_total") + delta("mtpserve:engine_sample_seconds_total") <= step_s
    # At k = 1 every step drafts after its tokens are known; its host part before the launch lies within the step too.
    assert 0 < delta("mtpserve:engine_draft_host_seconds_total") < step_s
    assert value(after, "mtpserve:engine_draft_host_seconds_total") == engine.stats().draft_host_seconds
    # The policy's plan is a part of that host work.
    assert 0 < delta("mtpserve:engine_plan_seconds_total") < delta("mtpserve:engine_draft_host_seconds_total")
    assert value(after, "mtpserve:engine_plan_seconds_total") == engine.stats().plan_seconds
    assert value(after, "mtpserve:engine_target_seconds_total") == engine.stats().target_seconds


def test_frontend_loop_cpu_is_the_event_loop_threads_cpu_time(served):
    client, _ = served
    loop = next(t for t in threading.enumerate() if t.name == "mtpserve-http")  # BackgroundServer's uvicorn thread
    clock = time.pthread_getcpuclockid(loop.ident)
    before = value(scrape(client), "mtpserve:frontend_loop_cpu_seconds_total")
    client.completions([3, 4, 5, 6], max_tokens=12, temperature=0, ignore_eos=True)
    low = time.clock_gettime(clock)
    after = value(scrape(client), "mtpserve:frontend_loop_cpu_seconds_total")
    # Read on that thread during the scrape: neither the process's CPU time nor another thread's.
    assert before < low <= after <= time.clock_gettime(clock)


def test_accepted_drafts_are_counted_per_position(served):
    """The random tiny model's MTP layer rarely guesses right, so the engine's test hook feeds it
    the known greedy continuation as drafts: every draft is then accepted."""
    client, engine = served
    prompt, params = [9, 10, 11, 12], SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)

    async def run(request_id):
        return [t async for d in engine.generate(prompt, params, request_id=request_id) for t in d.token_ids]

    tokens = asyncio.run(run("plain"))
    before = scrape(client)
    engine.engine.override_drafts("forced", tokens)
    assert asyncio.run(run("forced")) == tokens
    after = scrape(client)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    drafts, accepted = delta("mtpserve:spec_decode_num_drafts_total"), delta(
        "mtpserve:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and accepted == drafts
    assert delta("mtpserve:spec_decode_num_accepted_tokens_per_pos_total", position="0") == accepted


def test_prefix_cache_hits_are_exported(served):
    client, engine = served
    prompt = list(range(20, 60))  # five full blocks of 8
    before = scrape(client)
    client.completions(prompt, max_tokens=2)
    client.completions(prompt, max_tokens=2)
    after = scrape(client)
    hits = value(after, "mtpserve:prefix_cache_hits_total") - value(before, "mtpserve:prefix_cache_hits_total")
    queries = value(after, "mtpserve:prefix_cache_queries_total") - value(before, "mtpserve:prefix_cache_queries_total")
    assert hits >= 8 and queries >= hits  # the engine decides how much of the prompt it may reuse
    assert value(after, "mtpserve:prefix_cache_hits_total") == engine.stats().prefix_hits


def test_finish_reasons_are_counted(served):
    client, engine = served
    before = scrape(client)
    out = client.chat([{"role": "user", "content": "hi"}], max_tokens=200, stop=[" "], temperature=0, ignore_eos=True)
    expected_stop = out.choices[0].finish_reason == "stop"  # random text almost surely has a space

    async def abandon():  # a request whose reader goes away after its first output
        stream = engine.add_request([5, 6], SamplingParams(max_tokens=240, ignore_eos=True))
        await stream.__anext__()
        stream.close()

    asyncio.run(abandon())
    wait_idle(engine)
    after = scrape(client)

    def delta(reason):
        key = ("mtpserve:request_success_total", (("finished_reason", reason),))
        return after[key] - before[key]

    assert (delta("stop"), delta("length"), delta("abort"), delta("error")) == (
        int(expected_stop), int(not expected_stop), 1, 0)


def test_the_k_of_each_step_is_a_histogram(served):
    """A forced k schedule (1, 0, 1, 0, ...): the histogram's buckets count the steps at each k."""
    client, engine = served
    before = scrape(client)
    engine.engine.force_k_schedule([1, 0])
    try:
        client.completions([5, 6, 7, 8], max_tokens=24, temperature=0, ignore_eos=True)
        wait_idle(engine)
    finally:
        engine.engine.force_k_schedule([])
    after = scrape(client)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    at_0 = delta("mtpserve:spec_decode_step_k_bucket", le="0.0")
    at_most_1 = delta("mtpserve:spec_decode_step_k_bucket", le="1.0")
    assert at_0 > 0 and at_most_1 - at_0 > 0
    assert delta("mtpserve:spec_decode_step_k_bucket", le="+Inf") == at_most_1 == delta(
        "mtpserve:spec_decode_step_k_count")
    drafts = delta("mtpserve:spec_decode_num_drafts_total")
    assert delta("mtpserve:spec_decode_step_k_sum") == at_most_1 - at_0 == drafts
    assert list(engine.stats().spec.steps_by_k) == [value(after, "mtpserve:spec_decode_step_k_bucket", le="0.0"),
                                                    value(after, "mtpserve:spec_decode_step_k_count") -
                                                    value(after, "mtpserve:spec_decode_step_k_bucket", le="0.0")]
