"""Where its estimate gives a sequence no drafts (as at a load where even drafts that are always accepted would
not pay), the adaptive policy drops the sequence's waiting MTP fills instead of catching them up
(SpeculationPolicy's drop): their MTP cache rows stay unwritten, and the sequence drafts again, over those
holes, once the load falls. The load is forced here
(force_k_schedule's `unpaid`): output stays the k = 0 output while it rises past and falls below the
break-even, and a resumed sequence whose drafts are known good is accepted as often as before (blocks past a
hole are kept out of the prefix cache: test_deferred_fill.py)."""
import pytest

from mtpserve import LLM
from test_deferred_fill import make_engine, model, step_outputs  # noqa: F401 (model: a fixture)
from test_drafting_retirement import engine_metric_families
from test_mtp import BASE, BATCHES, VARIANTS, assert_greedy_equals_baseline, baseline  # noqa: F401 (a fixture)

# k per drafting step, and whether that step's load is past the break-even (what waits is dropped): k = 0
# stretches past it (stashes of 4 fill and are dropped), a probe past it (drafts over a dropped stash), then
# k = 0 below it (the stash is caught up) and drafting there.
SCHEDULE = [0] * 12 + [2] + [0] * 6 + [3] + [0] * 8 + [1]
UNPAID = [True] * 13 + [False] * 7 + [True] * 8 + [False]


@pytest.mark.parametrize("variant", ["chunked+prefix", "preempting-cache"])
def test_greedy_equals_k0_while_the_load_rises_past_and_falls_below_the_break_even(tiny_model_dir, baseline, variant):
    llm = LLM(str(tiny_model_dir), **{**BASE, **VARIANTS[variant]}, num_speculative_tokens=3,
              speculative_policy="adaptive", deferred_fill_positions=4)
    try:
        llm.core.engine.force_k_schedule(SCHEDULE, UNPAID)
        stats = assert_greedy_equals_baseline(llm, baseline, variant)
        assert stats.dropped_positions > 0 and stats.caught_up_positions > 0 and stats.spec.draft_tokens > 0
        assert stats.spec.retired == 0
        families = engine_metric_families(llm.stats)
        for name, value in (("dropped", stats.dropped_positions), ("caught_up", stats.caught_up_positions)):
            [sample] = families[f"mtpserve:spec_decode_num_{name}_positions"].samples
            assert sample.value == value
    finally:
        llm.shutdown()


def test_a_sequence_whose_fills_were_dropped_drafts_as_well_when_it_resumes(model):
    """k = 3 for 12 steps, then 48 steps of k = 0 past the break-even (stashes of 4 dropped: holes in the MTP
    cache), then k = 3 again. On this prompt the drafts are known good: after resuming they are accepted as
    often as before the holes, and as often as where the stashes were caught up instead."""
    model, _ = model
    prompt, drafting, dropping = BATCHES[4][0], 12, 48
    schedule = [3] * drafting + [0] * dropping + [3] * 200
    runs = {}
    for name, unpaid in (("dropped", [False] * drafting + [True] * dropping + [False]), ("caught up", [False])):
        engine, _, _ = make_engine(model, schedule, 4)
        engine.force_k_schedule(schedule, unpaid)
        try:
            steps = step_outputs(engine, "r", prompt, 160)
            runs[name] = ([t for o in steps for t in o.token_ids], [o.spec for o in steps], engine.stats())
        finally:
            engine.shutdown()
    (out, specs, stats), (out_caught_up, specs_caught_up, stats_caught_up) = runs["dropped"], runs["caught up"]
    assert out == out_caught_up
    assert stats.dropped_positions >= 40 and stats_caught_up.dropped_positions == 0
    assert stats.caught_up_positions < stats_caught_up.caught_up_positions

    def acceptance(first, last):
        return (last.accepted_tokens - first.accepted_tokens) / (last.draft_tokens - first.draft_tokens)

    # Output j comes from step j (the prefill is step 0): the first `drafting` plans are verified by then.
    before = specs[drafting].accepted_tokens / specs[drafting].draft_tokens
    after = acceptance(specs[drafting], specs[-1])
    assert specs[-1].draft_tokens - specs[drafting].draft_tokens > 30
    assert after >= before
    assert after == acceptance(specs_caught_up[drafting], specs_caught_up[-1])

