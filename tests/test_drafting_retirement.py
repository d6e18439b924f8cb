"""A sequence whose drafts do not pay is retired from drafting once its stash of deferred MTP fills is full
(SpeculationPolicy's retire): its stash is dropped and it runs no MTP fill, catch-up or draft again. Where
every step fills (no stash: a GPU's default) sequences retire once the batch's drafting has not paid for a
while. Output stays the k = 0 output; a sequence whose drafts are all accepted is never
retired; the count shows per request and in /metrics."""
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mtpserve import LLM, _C
from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.model_loader import load_model
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.metrics import EngineStatsCollector
from test_deferred_fill import generate, make_engine
from test_mtp import BASE, BATCHES, VARIANTS, prompts, tokens

LONG = SamplingParams(temperature=0, max_tokens=120, ignore_eos=True)


def engine_metric_families(stats) -> dict:
    """The families /metrics would show for an engine whose stats() is `stats`, by name."""
    registry = CollectorRegistry()
    registry.register(EngineStatsCollector(stats, "tiny"))
    return {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}


def wrong(outputs):
    """Drafts that are never accepted: each output token shifted by one."""
    return [(t + 1) % 512 for t in outputs]


def retiring_llm(model_dir, **overrides):
    """Stashes of 4 positions (unless overridden): a sequence whose drafts fail retires within its first few dozen
    steps."""
    return LLM(str(model_dir), **{**BASE, "deferred_fill_positions": 4, **overrides}, num_speculative_tokens=3,
               speculative_policy="adaptive")


@pytest.fixture(scope="module")
def expected(tiny_model_dir):
    llm = LLM(str(tiny_model_dir), **BASE)
    try:
        yield tokens(llm.generate(BATCHES[4], LONG))
    finally:
        llm.shutdown()


@pytest.mark.parametrize("variant", ["chunked+prefix", "preempting-cache"])
def test_rejected_drafts_retire_correct_ones_never_and_greedy_output_equals_k0(tiny_model_dir, expected, variant):
    llm = retiring_llm(tiny_model_dir, **VARIANTS[variant])
    try:
        # A fresh LLM numbers its requests "0", "1", ...: request 0 drafts its own output, the others wrong tokens.
        for i, out in enumerate(expected):
            llm.core.engine.override_drafts(str(i), out if i == 0 else wrong(out))
        outs = llm.generate(BATCHES[4], LONG)
        assert tokens(outs) == expected
        retired = [o.metrics.retired_from_drafting for o in outs]
        assert retired[0] == 0 and all(r >= 1 for r in retired[1:]), retired
        assert llm.stats().spec.retired == sum(retired)
        assert outs[0].metrics.num_accepted_tokens == outs[0].metrics.num_draft_tokens > 0
        if variant == "preempting-cache":
            assert llm.stats().preemptions > 0
    finally:
        llm.shutdown()


@pytest.mark.parametrize("variant", ["chunked+prefix", "preempting-cache"])
def test_where_every_step_fills_rejected_drafts_retire_and_greedy_output_equals_k0(tiny_model_dir, expected,
                                                                                 variant):
    llm = retiring_llm(tiny_model_dir, **VARIANTS[variant], deferred_fill_positions=0)
    try:
        for i, out in enumerate(expected):
            llm.core.engine.override_drafts(str(i), wrong(out))
        outs = llm.generate(BATCHES[4], LONG)
        assert tokens(outs) == expected
        retired = [o.metrics.retired_from_drafting for o in outs]
        assert all(r >= 1 for r in retired), retired
        assert llm.stats().spec.retired == sum(retired) and llm.stats().fill_skipped_steps > 0
    finally:
        llm.shutdown()


def test_where_every_step_fills_sequences_whose_drafts_are_accepted_never_retire():
    """Requests 0 and 1 draft tokens that are all accepted and outlive the others (200 tokens at up to 4 a step
    against 40 at 1). On this CPU the batch's drafting sits near its break-even while the rejected ones run,
    so they may retire or not; the accepted ones never do, and keep drafting after the others finish. The
    embedded trained model: on the random tiny one the MTP layer is a quarter of the model."""
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (200, 200, 40, 40)]
    plain = LLM(DEFAULT_MODEL, **BASE)
    try:
        expected = tokens(plain.generate(BATCHES[4], params))
    finally:
        plain.shutdown()
    llm = retiring_llm(DEFAULT_MODEL, deferred_fill_positions=0)
    try:
        for i, out in enumerate(expected):
            llm.core.engine.override_drafts(str(i), out if i < 2 else wrong(out))
        outs = llm.generate(BATCHES[4], params)
        assert tokens(outs) == expected
        retired = [o.metrics.retired_from_drafting for o in outs]
        assert retired[:2] == [0, 0] and llm.stats().spec.retired == sum(retired), retired
        # Past the others' 40 tokens, 160 more at up to 4 a step.
        assert all(o.metrics.num_accepted_tokens >= 100 for o in outs[:2])
    finally:
        llm.shutdown()


def test_where_every_step_fills_new_requests_of_a_class_whose_drafts_fail_retire_before_their_prompts_fill(
        tiny_model_dir, expected):
    """Greedy requests whose drafts are all rejected teach the greedy class's record that its drafts fail. Once it
    weighs enough (one batch here), a new greedy request retires on arrival, before its prompt runs, instead of after
    a streak of 6 failed plans: the MTP layer runs on at most 3 of a batch's steps (7 where each retires by its
    streak). (When it retired at its first plan instead, a batch's first request could step alone, in a batch size
    whose warm-up was not over, and not retire: batch 1 still filled on 6 steps or more.) Output stays k = 0's."""
    llm = retiring_llm(tiny_model_dir, deferred_fill_positions=0, max_tokens_per_batch=512)
    try:
        filled = []
        for batch in range(6):
            for i, out in enumerate(expected):
                llm.core.engine.override_drafts(str(4 * batch + i), wrong(out))
            before = llm.stats()
            outs = llm.generate(BATCHES[4], LONG)
            after = llm.stats()
            assert tokens(outs) == expected
            filled.append((after.steps - before.steps) - (after.fill_skipped_steps - before.fill_skipped_steps))
        assert filled[0] >= 6 and all(f <= 3 for f in filled[1:]), filled
    finally:
        llm.shutdown()


def test_requests_retired_on_arrival_share_the_prompts_of_retired_requests(tiny_model_dir, expected):
    """Once the greedy class's record says its drafts fail, new greedy requests retire on arrival and never fill the
    MTP cache, so the prefix cache may serve them blocks without MTP rows: sent twice, fresh prompts are served as
    much of themselves the second time as an engine without MTP serves. (Blocks without MTP rows used to stay out
    of the prefix cache: a retired request's prompt was never shared.) Output stays k = 0's. Where every step fills:
    with deferred fills the class's record is judged against drafts that are always accepted, which at batch 4 on
    a CPU sit near the break-even, so whether a request retires on arrival there rests on the step timings."""
    fresh = prompts(4, 23, low=30, high=60)
    plain = LLM(str(tiny_model_dir), **{**BASE, "max_tokens_per_batch": 512})
    try:
        want = [plain.generate(fresh, LONG) for _ in range(2)]
    finally:
        plain.shutdown()
    llm = retiring_llm(tiny_model_dir, deferred_fill_positions=0, max_tokens_per_batch=512)
    try:
        # The class's record: every draft rejected. (Each request that takes the record's word weighs it down a
        # little, so that the class is measured again after a few dozen: not within this test.)
        for batch in range(2):
            for i, out in enumerate(expected):
                llm.core.engine.override_drafts(str(4 * batch + i), wrong(out))
            assert tokens(llm.generate(BATCHES[4], LONG)) == expected
        got = [llm.generate(fresh, LONG) for _ in range(2)]
    finally:
        llm.shutdown()
    assert [tokens(g) for g in got] == [tokens(w) for w in want]
    assert [o.metrics.retired_from_drafting for o in got[1]] == [1] * 4
    assert [o.metrics.num_draft_tokens for o in got[1]] == [0] * 4
    cached = [[o.metrics.num_cached_tokens for o in g] for g in got]
    assert cached[1] == [o.metrics.num_cached_tokens for o in want[1]] and min(cached[1]) >= 24, cached


@pytest.mark.parametrize("deferred", [4, 0], ids=["stash-full", "every-step-fills"])
def test_once_every_sequence_retired_steps_do_no_drafting_work(deferred):
    """A step whose sequences have all retired runs no drafting at all (no MTP forward, no policy, no drafting
    timer): the engine's drafting time stops growing while the steps go on, each counted as one that skipped the
    fill. Read from the outputs as they come: an output that shows the retirement is published after the step
    that retired the sequence has added its drafting time."""
    model = load_model(DEFAULT_MODEL, dtype="float32")
    prompt, max_tokens = BATCHES[1][0], 120
    plain, _, _ = make_engine(model, [0], 0)
    try:
        expected, _ = generate(plain, "r", prompt, max_tokens)
    finally:
        plain.shutdown()
    engine, _, _ = make_engine(model, [], deferred)
    try:
        engine.override_drafts("r", wrong(expected))
        engine.add_request("r", prompt, _C.SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True))
        outputs, at_retirement = [], None
        while not outputs or not outputs[-1].finished:
            for out in engine.get_outputs(1.0):
                outputs.append(out)
                if at_retirement is None and out.spec.retired:
                    at_retirement = engine.stats(), len(outputs)
        stats = engine.stats()
    finally:
        engine.shutdown()
    assert [t for o in outputs for t in o.token_ids] == expected
    assert at_retirement is not None, "the sequence never retired"
    before, seen = at_retirement
    steps_after = stats.steps - before.steps
    assert len(outputs) - seen >= 40 and steps_after >= 10  # retired early: many steps ran after the snapshot
    assert stats.draft_seconds == before.draft_seconds
    # Each skipped the fill but the last (the sequence finished: nothing to skip), and the one the snapshot may
    # have caught between its count of skipped fills and its count of steps.
    assert stats.fill_skipped_steps - before.fill_skipped_steps >= steps_after - 2


@pytest.mark.parametrize("deferred", [4, 0], ids=["stash-full", "every-step-fills"])
def test_a_retired_sequence_writes_no_mtp_row_after_it_retires(deferred):
    """The MTP cache starts zeroed: a row that stays zero was never written by a fill, catch-up or draft."""
    model = load_model(DEFAULT_MODEL, dtype="float32")
    prompt, max_tokens = BATCHES[1][0], 120
    plain, _, _ = make_engine(model, [0], 0)  # k = 0 every step, filling every step
    try:
        expected, _ = generate(plain, "r", prompt, max_tokens)
    finally:
        plain.shutdown()
    engine, _, mtp_cache = make_engine(model, [], deferred)  # the policy's own choices
    try:
        engine.override_drafts("r", wrong(expected))
        out, spec = generate(engine, "r", prompt, max_tokens)
        stats = engine.stats()
    finally:
        engine.shutdown()
    assert out == expected
    assert spec.retired == stats.spec.retired == 1
    written = mtp_cache.view(-1, mtp_cache.shape[-1])[:len(prompt) + max_tokens].abs().sum(-1).gt(0)
    assert written[:len(prompt)].all()  # the prefill's fill
    # Retired within its first 40 tokens (warm-up, then a full stash of 4 or a streak of failed drafts): nothing
    # written past there.
    assert written[len(prompt):len(prompt) + 16].any() and not written[len(prompt) + 40:].any()


def test_the_policy_counts_are_prometheus_counters(tiny_model_dir, expected):
    llm = retiring_llm(tiny_model_dir)
    try:
        llm.core.engine.override_drafts("0", wrong(expected[0]))
        out = llm.generate([BATCHES[4][0]], LONG)[0]
        families, stats = engine_metric_families(llm.stats), llm.stats()
        [retired] = families["mtpserve:spec_decode_num_retired_sequences"].samples
        assert retired.value == stats.spec.retired == out.metrics.retired_from_drafting == 1
        [skipped] = families["mtpserve:spec_decode_num_fill_skipped_steps"].samples
        [seconds] = families["mtpserve:spec_decode_draft_seconds"].samples
        assert skipped.value == stats.fill_skipped_steps > 0 and seconds.value == stats.draft_seconds > 0
    finally:
        llm.shutdown()
