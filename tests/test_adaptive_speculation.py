"""The adaptive speculation policy in the engine: output stays exactly the k = 0 output while the
step's k changes (a forced k schedule, and the policy's own choices), with chunked prefill, the
prefix cache, preemption, stops and logprobs; the chosen k is counted per step and per request."""
import pytest

from mtpserve import LLM
from mtpserve.sampling_params import SamplingParams
from conftest import write_tiny_model
from test_mtp import (BASE, BATCHES, GREEDY_64, VARIANTS, assert_greedy_equals_baseline, greedy_without_mtp,
                      run_with_drafts, tokens)

SCHEDULE = [3, 0, 1, 2, 0, 0, 3, 1]


@pytest.fixture(scope="module")
def baseline(tiny_model_dir):
    llm = LLM(str(tiny_model_dir), **BASE)
    yield llm, {n: tokens(llm.generate(batch, GREEDY_64)) for n, batch in BATCHES.items()}
    llm.shutdown()


def adaptive(model_dir, **overrides):
    return LLM(str(model_dir), **{**BASE, **overrides}, num_speculative_tokens=3, speculative_policy="adaptive")


# Planned ahead (EngineConfig.plan_ahead, the accelerators' default, with their fill every step): the plan is made
# while the target forward runs, as if every sequence gained a token, and fitted to the sequences that draft after it.
AHEAD = dict(plan_ahead=True, deferred_fill_positions=0)


@pytest.mark.parametrize("variant, ahead", [("chunked+prefix", False), ("preempting-cache", False),
                                            ("chunked+prefix", True), ("preempting-cache", True)])
def test_greedy_equals_k0_while_a_forced_schedule_changes_k_every_step(tiny_model_dir, baseline, variant, ahead):
    llm = adaptive(tiny_model_dir, **VARIANTS[variant], **(AHEAD if ahead else {}))
    try:
        assert llm.core._config().plan_ahead is ahead  # what the C++ engine was given
        llm.core.engine.force_k_schedule(SCHEDULE)
        stats = assert_greedy_equals_baseline(llm, baseline[1], variant)
        assert all(steps > 0 for steps in stats.spec.steps_by_k), list(stats.spec.steps_by_k)
    finally:
        llm.shutdown()


def test_per_request_counters_add_up_to_the_drafts(tiny_model_dir):
    llm = adaptive(tiny_model_dir)
    try:
        llm.core.engine.force_k_schedule(SCHEDULE)
        outs = llm.generate(BATCHES[4], GREEDY_64)
        for out in outs:
            m = out.metrics
            assert len(m.steps_by_k) == 4
            # Every output token after the prefill's comes from one decode step (+ its accepted drafts).
            assert sum(m.steps_by_k) + m.num_accepted_tokens == len(out.outputs[0].token_ids) - 1
            assert sum(k * n for k, n in enumerate(m.steps_by_k)) == m.num_draft_tokens
            assert sum(m.steps_by_k[1:]) == m.num_drafts
        engine_steps = llm.stats().spec.steps_by_k
        assert sum(engine_steps) <= llm.stats().steps
    finally:
        llm.shutdown()


def test_stops_and_logprobs_under_changing_k(tiny_model_dir, baseline):
    plain, _ = baseline
    prompt = BATCHES[1][0]
    expected = tokens(plain.generate([prompt], GREEDY_64))[0]
    stop_at = next(i for i in range(10, 64) if expected[i] not in expected[:i])
    params = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True, logprobs=2,
                            stop_token_ids=[expected[stop_at]])
    reference = plain.generate([prompt], params)[0].outputs[0]
    llm = adaptive(tiny_model_dir)
    try:
        llm.core.engine.force_k_schedule(SCHEDULE)
        got = llm.generate([prompt], params)[0].outputs[0]
        assert got.token_ids == expected[:stop_at + 1] == reference.token_ids
        assert got.finish_reason == "stop" and got.stop_reason == expected[stop_at]
        assert len(got.logprobs) == len(got.token_ids)
        for mine, theirs in zip(got.logprobs, reference.logprobs):
            assert mine.keys() == theirs.keys()
            for token in mine:
                assert mine[token].logprob == pytest.approx(theirs[token].logprob, abs=1e-4)
                assert mine[token].rank == theirs[token].rank
    finally:
        llm.shutdown()


@pytest.fixture(scope="module")
def deep_model_dir(tmp_path_factory):
    """The tiny model with 8 layers, not 3: there drafts that are all accepted emit about 2.5 times the tokens per
    second of a step without MTP at k = 3 on a CPU, not 1.7 times, a margin that a loaded CPU's noisy step costs do
    not eat (with 3 layers, planned ahead, 3 runs in 16 retired the request within 9 steps beside two busy loops)."""
    return write_tiny_model(tmp_path_factory.mktemp("deep_model"), num_hidden_layers=8)


@pytest.mark.parametrize("ahead", [False, True])
def test_the_policy_drafts_for_always_accepted_drafts_and_stops_for_always_rejected(deep_model_dir, ahead):
    """Its own choices, past the warm-up: known-correct drafts (all accepted) make drafting pay, so most
    steps draft; known-wrong drafts never pay, so most steps do not. The output is exact either way. The
    warm-up request drafts the same kind of drafts: its evidence is what the policy starts the measured
    request from (warmed up on the random tiny model's own drafts, the all-accepted request began from a
    prior of rejected drafts and, in about 1 run in 6 under load, spent most of its steps at k = 0 first)."""
    prompt = BATCHES[1][0]
    params = SamplingParams(temperature=0, max_tokens=220, ignore_eos=True)
    expected, _ = greedy_without_mtp(deep_model_dir, prompt, params)
    for future, drafting in ((expected, True), ([(t + 1) % 512 for t in expected], False)):
        llm = adaptive(deep_model_dir, **(AHEAD if ahead else {}))
        try:
            warmup, _ = run_with_drafts(llm, prompt, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True),
                                        future)
            assert warmup == expected[:40]
            before = list(llm.stats().spec.steps_by_k)
            got, _ = run_with_drafts(llm, prompt, params, future)
            assert got == expected
            steps = [a - b for a, b in zip(llm.stats().spec.steps_by_k, before)]
            assert (sum(steps[1:]) > steps[0]) == drafting, steps
        finally:
            llm.shutdown()


def test_the_policy_flag_defaults_to_adaptive_and_refuses_unknown_policies():
    from mtpserve.cli import build_parser, engine_args
    from mtpserve.engine_args import EngineArgs

    assert engine_args(build_parser().parse_args(["serve"])).speculative_policy == "adaptive"
    fixed = build_parser().parse_args(["serve", "--speculative_policy", "fixed"])
    assert engine_args(fixed).speculative_policy == "fixed"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--speculative_policy", "greedy"])
    with pytest.raises(ValueError, match="speculative_policy must be one of adaptive, fixed"):
        EngineArgs(speculative_policy="greedy")


def test_planning_ahead_is_off_on_the_cpu_by_default_and_the_flag_takes_booleans_only():
    from mtpserve.cli import build_parser, engine_args
    from mtpserve.engine_args import EngineArgs

    assert EngineArgs(devices="cpu").plan_ahead is False
    assert engine_args(build_parser().parse_args(["serve", "--devices", "cpu"])).plan_ahead is False
    assert engine_args(build_parser().parse_args(["serve", "--devices", "cpu", "--plan_ahead", "true"])).plan_ahead
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--plan_ahead", "sometimes"])
    with pytest.raises(ValueError, match="plan_ahead must be true or false, got 'yes'"):
        EngineArgs(devices="cpu", plan_ahead="yes")
