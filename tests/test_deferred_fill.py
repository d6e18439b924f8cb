"""The adaptive policy's k = 0 steps skip the MTP fill (EngineConfig.deferred_fill_positions): a sequence
given no drafts stashes its target hidden states and catches up when it drafts again. Output stays the
k = 0 output; after a catch-up the MTP cache rows (and so the drafts) are those of an engine that filled
every step; the stash is capped, dies with a preempted sequence, and keeps unfilled blocks out of the
prefix cache."""
import pytest
import torch

from mtpserve import LLM, _C
from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.model_loader import load_model
from mtpserve.sampling_params import SamplingParams
from test_mtp import BASE, BATCHES, GREEDY_64, VARIANTS, tokens

# Long k = 0 stretches, then drafting: every stretch is caught up in one fill.
LONG_ZEROS = [0] * 12 + [2, 1] + [0] * 6 + [3]
BLOCK = 8


@pytest.fixture(scope="module")
def baseline(tiny_model_dir):
    llm = LLM(str(tiny_model_dir), **BASE)
    yield {n: tokens(llm.generate(batch, GREEDY_64)) for n, batch in BATCHES.items()}
    llm.shutdown()


def adaptive(model_dir, **overrides):
    return LLM(str(model_dir), **{**BASE, **overrides}, num_speculative_tokens=3, speculative_policy="adaptive")


def test_deferral_is_on_by_default_on_the_cpu_and_the_flag_says_accelerators_keep_it_off(capsys):
    from mtpserve.cli import build_parser, engine_args
    from mtpserve.engine_args import EngineArgs

    assert EngineArgs(devices="cpu").deferred_fill_positions == 64
    assert engine_args(build_parser().parse_args(["serve", "--devices", "cpu"])).deferred_fill_positions == 64
    assert EngineArgs(devices="cpu", deferred_fill_positions=0).deferred_fill_positions == 0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    assert "0 on GPUs and NPUs" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("variant", ["chunked+prefix", "no-chunked-prefill", "preempting-cache"])
def test_greedy_equals_k0_through_long_k0_stretches_and_catch_ups(tiny_model_dir, baseline, variant):
    llm = adaptive(tiny_model_dir, **VARIANTS[variant])
    try:
        llm.core.engine.force_k_schedule(LONG_ZEROS)
        for n, batch in BATCHES.items():
            assert tokens(llm.generate(batch, GREEDY_64)) == baseline[n], f"batch of {n}"
        stats = llm.stats()
        assert stats.fill_skipped_steps > 0 and stats.caught_up_positions > 0
        assert stats.spec.draft_tokens > 0
        assert stats.kv_usage == 0.0
        if variant == "preempting-cache":
            # Sequences are preempted while they hold stashed positions (most steps are k = 0 steps).
            assert stats.preemptions > 0
    finally:
        llm.shutdown()


def test_a_fill_runs_every_step_with_deferral_off_or_under_the_fixed_policy(tiny_model_dir, baseline):
    for llm in (adaptive(tiny_model_dir, deferred_fill_positions=0),
                LLM(str(tiny_model_dir), **BASE, num_speculative_tokens=3, speculative_policy="fixed")):
        try:
            llm.core.engine.force_k_schedule(LONG_ZEROS)
            assert tokens(llm.generate(BATCHES[4], GREEDY_64)) == baseline[4]
            assert (llm.stats().fill_skipped_steps, llm.stats().caught_up_positions) == (0, 0)
        finally:
            llm.shutdown()


def test_the_stash_cap_makes_a_sequence_catch_up_when_full(tiny_model_dir, baseline):
    """k = 0 throughout, 4 positions at most. Of the 62 decode steps whose sequence goes on (the 64th token
    ends it), the first 4 fill: their draft 1, compared with the next token, makes the sequence's own
    acceptance known. Then the steps stash 4 positions and every 5th fills 4 + 1: 11 catch up, 47 run no
    MTP forward."""
    prompt = BATCHES[1][0][:20]
    assert len(prompt) == 20
    plain = LLM(str(tiny_model_dir), **BASE)
    try:
        expected = tokens(plain.generate([prompt], GREEDY_64))
    finally:
        plain.shutdown()
    llm = adaptive(tiny_model_dir, deferred_fill_positions=4)
    try:
        llm.core.engine.force_k_schedule([0])
        assert tokens(llm.generate([prompt], GREEDY_64)) == expected
        stats = llm.stats()
        assert (stats.fill_skipped_steps, stats.caught_up_positions) == (47, 44)
    finally:
        llm.shutdown()


def make_engine(model, schedule, deferred, prefix_cache=False):
    config = _C.EngineConfig()
    config.block_size, config.num_blocks, config.max_model_len = BLOCK, 128, 512
    config.enable_prefix_cache = prefix_cache
    config.num_speculative_tokens = 3
    config.speculative_policy = _C.SpeculationPolicyKind.adaptive
    config.deferred_fill_positions = deferred
    scheduler = _C.SchedulerConfig()
    scheduler.max_tokens_per_batch = 32
    scheduler.num_speculative_tokens = 3
    config.scheduler = scheduler
    caches, mtp_caches = model.allocate_caches(config.num_blocks, config.block_size)
    engine = _C.Engine(config, model.target, caches, model.mtp_layers[0], mtp_caches[0])
    engine.force_k_schedule(schedule)
    return engine, caches, mtp_caches[0]


def step_outputs(engine, request_id, prompt, max_tokens):
    """A greedy request's outputs, one per step (each with the request's counters so far)."""
    engine.add_request(request_id, prompt, _C.SamplingParams(temperature=0.0, max_tokens=max_tokens,
                                                             ignore_eos=True))
    out = []
    while not out or not out[-1].finished:
        out += [o for o in engine.get_outputs(1.0) if o.request_id == request_id]
    assert not out[-1].error
    return out


def generate(engine, request_id, prompt, max_tokens):
    out = step_outputs(engine, request_id, prompt, max_tokens)
    return [t for o in out for t in o.token_ids], out[-1].spec


@pytest.fixture(scope="module", params=[False, True], ids=["default-kernels", "batch-invariant"])
def model(request):
    """The embedded trained model: its drafts are mostly accepted, so a changed draft shows in the counts."""
    return load_model(DEFAULT_MODEL, dtype="float32", batch_invariant=request.param), request.param


def test_after_a_catch_up_the_mtp_cache_and_drafts_equal_an_engine_that_filled_every_step(model):
    """One sequence, k = 0 for 10 steps then k = 1, over and over: the deferring engine's MTP cache rows
    (written by catch-ups of 10 + 1 rows) against those of an engine that filled each row in its step.
    Batch-invariant kernels give a row the same bits whatever rows run with it: equal exactly. The default
    CPU kernels take other paths for an 11-row fill than for a 1-row one (GEMM blocking, the attention of
    a chunk against that of one query), so there equal to float32 rounding, with the same drafts."""
    model, invariant = model
    prompt, max_tokens = BATCHES[1][0], 64
    schedule = [0] * 10 + [1]
    runs = []
    for deferred in (64, 0):
        engine, caches, mtp_cache = make_engine(model, schedule, deferred)
        try:
            out, spec = generate(engine, "r", prompt, max_tokens)
            runs.append((out, spec, caches, mtp_cache, engine.stats()))
        finally:
            engine.shutdown()
    (out_a, spec_a, caches_a, mtp_a, stats_a), (out_b, spec_b, caches_b, mtp_b, stats_b) = runs
    assert stats_a.caught_up_positions >= 30 and stats_b.caught_up_positions == 0
    assert out_a == out_b
    assert spec_a.drafts == spec_b.drafts > 3
    assert list(spec_a.accepted_per_position) == list(spec_b.accepted_per_position)
    # The same blocks in both (the target caches agree), so a position's MTP row is in the same place.
    for a, b in zip(caches_a, caches_b):
        assert torch.equal(a, b)
    # Positions up to the last catch-up: every 11th step of fewer than 2 tokens each passes 30 outputs.
    n = len(prompt) + 30
    rows_a, rows_b = mtp_a.view(-1, mtp_a.shape[-1])[:n], mtp_b.view(-1, mtp_b.shape[-1])[:n]
    assert rows_b.abs().sum(-1).gt(0).all()
    if invariant:
        assert torch.equal(rows_a, rows_b)
    else:
        torch.testing.assert_close(rows_a, rows_b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("unfilled", ["waiting", "dropped"])
def test_blocks_whose_mtp_rows_are_not_written_are_not_shared_through_the_prefix_cache(model, unfilled):
    """A first request ends inside a k = 0 stretch: its last positions wait in the stash, or (forced past the
    break-even, stashes of 4) its stashes were dropped, leaving holes in its MTP cache. A second one continues
    its conversation (prompt = the first's prompt + output) and drafts every step. Its drafts, and so its
    acceptance, equal those of an engine that never deferred: it never reads an unwritten MTP row."""
    model, invariant = model
    if not invariant:
        pytest.skip("a prefix hit against a recomputed block compares prefill with decode rows: exact only "
                    "under batch-invariant kernels")
    prompt = BATCHES[1][0]
    deferred = 64 if unfilled == "waiting" else 4
    specs, hits, dropped = [], [], []
    for positions in (deferred, 0):
        engine, _, _ = make_engine(model, [0], positions, prefix_cache=True)
        engine.force_k_schedule([0], [unfilled == "dropped"])
        try:
            first, _ = generate(engine, "first", prompt, 40)
            engine.force_k_schedule([2])
            _, spec = generate(engine, "second", prompt + first + [5, 6, 7], 32)
            specs.append((spec.drafts, list(spec.accepted_per_position)))
            hits.append(engine.stats().prefix_hits)
            dropped.append(engine.stats().dropped_positions)
        finally:
            engine.shutdown()
    assert specs[0] == specs[1]
    assert specs[0][0] > 0
    assert (dropped[0] > 0) == (unfilled == "dropped") and dropped[1] == 0
    # The deferring engine shares fewer blocks: those past its first unwritten position are recomputed.
    assert hits[0] < hits[1]


def test_seeded_sampling_is_unchanged_by_deferral(tiny_model_dir):
    """A seeded sampled request's tokens do not depend on whether its fills were deferred (same drafts,
    same uniforms)."""
    prompt = BATCHES[1][0]
    params = SamplingParams(temperature=1.0, max_tokens=48, ignore_eos=True, seed=7)
    got, skipped = [], []
    for deferred in (64, 0):
        llm = adaptive(tiny_model_dir, deferred_fill_positions=deferred)
        try:
            llm.core.engine.force_k_schedule([0] * 6 + [2])
            got.append(tokens(llm.generate([prompt], params))[0])
            skipped.append(llm.stats().fill_skipped_steps)
        finally:
            llm.shutdown()
    assert got[0] == got[1]
    assert skipped[0] > 0 == skipped[1]


def test_a_new_sequence_of_a_known_class_stashes_its_fills_from_its_first_decode_step(tiny_model_dir):
    """A sequence given no drafts stashes its fill once its acceptance is known; until then the fill runs, its draft 1
    measuring the sequence. Where its sampling class's record is known, the sequence is known from the start: at k = 0
    its fill waits on every decode step. In a fresh engine (no record yet) the fill runs on its first decode steps.
    (At batch 64 on a CPU, where no drafts paid, a batch of new greedy sequences filled on 5 of its 127 steps.)"""
    short = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)

    def k0_batch(llm):
        llm.core.engine.force_k_schedule([0])
        before = llm.stats()
        llm.generate(BATCHES[1], short)
        after = llm.stats()
        decode_steps = sum(after.spec.steps_by_k) - sum(before.spec.steps_by_k)
        return after.fill_skipped_steps - before.fill_skipped_steps, decode_steps

    fresh, known = adaptive(tiny_model_dir), adaptive(tiny_model_dir)
    try:
        skipped, decode_steps = k0_batch(fresh)
        assert 0 < skipped < decode_steps - 1
        known.core.engine.force_k_schedule([3])
        known.generate(BATCHES[32], short)
        skipped, decode_steps = k0_batch(known)
        assert skipped == decode_steps - 1  # the last finishes the request: there is nothing to fill or skip
    finally:
        fresh.shutdown()
        known.shutdown()
