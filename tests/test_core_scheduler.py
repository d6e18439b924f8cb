"""Scheduler: continuous batching, chunked prefill, preemption and speculative reservations,
driven by a tiny simulated engine loop over the real C++ Scheduler and BlockManager."""
from __future__ import annotations

import pytest

from mtpserve._C import (
    BlockManager,
    FinishReason,
    SamplingParams,
    Scheduler,
    SchedulerConfig,
    Sequence,
    SequenceStatus,
)


def model_token(seq_id: int, position: int) -> int:
    """What the simulated model emits at a position: deterministic, so recompute after a
    preemption and speculative runs must reproduce exactly the same output."""
    return 1000 + (seq_id * 7919 + position * 104729) % 5000


def prompt(seq_id: int, length: int) -> list[int]:
    return [(seq_id * 31 + i) % 997 for i in range(length)]


def expected_tokens(seq: Sequence, max_tokens: int) -> list[int]:
    p = seq.num_prompt_tokens
    return list(seq.tokens[:p]) + [model_token(seq.id, q) for q in range(p, p + max_tokens)]


class SimEngine:
    """Advances sequences the way the engine does after each step, and checks the
    scheduler's invariants on every step."""

    def __init__(self, num_blocks: int, block_size: int, prefix_cache: bool = True, drafts: str | None = None,
                 **config):
        self.config = SchedulerConfig(**config)
        self.bm = BlockManager(num_blocks, block_size, prefix_cache)
        self.sched = Scheduler(self.config, self.bm)
        self.drafts = drafts  # None, "right" (the model's own future tokens) or "wrong"
        self.live: dict[int, Sequence] = {}
        self.finished: list[Sequence] = []
        self.outputs = []
        self.admissions: list[int] = []  # seq ids in the order they went waiting -> running

    def add(self, seq_id: int, prompt_len: int, max_tokens: int = 8) -> Sequence:
        seq = Sequence(seq_id, prompt(seq_id, prompt_len), SamplingParams(temperature=0.0, max_tokens=max_tokens))
        self.sched.add(seq)
        self.live[seq_id] = seq
        return seq

    def step(self):
        was_running = {i for i, s in self.live.items() if s.status == SequenceStatus.RUNNING}
        before = {i: (s.num_computed_tokens, len(s.draft_tokens)) for i, s in self.live.items()}
        out = self.sched.schedule()
        self.check(out, before)
        self.admissions += [s.seq_id for s in out.scheduled if s.seq_id not in was_running]
        for s in out.scheduled:
            self.advance(s)
        self.check_refcounts()
        self.outputs.append(out)
        return out

    def check(self, out, before):
        cfg = self.config
        ids = [s.seq_id for s in out.scheduled]
        assert len(ids) == len(set(ids))
        assert len(ids) <= cfg.max_seqs_per_batch
        assert self.sched.num_running <= cfg.max_seqs_per_batch
        oversized_alone = len(ids) == 1 and not cfg.enable_chunked_prefill
        assert out.num_tokens <= cfg.max_tokens_per_batch or oversized_alone
        for s in out.scheduled:
            seq = s.seq
            assert s.num_new_tokens >= 1
            assert seq.status == SequenceStatus.RUNNING
            assert len(seq.block_table) * self.bm.block_size >= seq.num_computed_tokens + s.num_new_tokens
            assert seq.num_computed_tokens + s.num_new_tokens <= seq.num_tokens + len(seq.draft_tokens)
            if not s.is_prefill:
                assert s.num_new_tokens == 1 + len(seq.draft_tokens)
                assert len(seq.draft_tokens) <= cfg.num_speculative_tokens
                assert s.samples
        for seq in out.preempted:
            assert seq.status == SequenceStatus.WAITING and seq.block_table == [] and seq.draft_tokens == []

    def check_refcounts(self):
        held = [b for s in self.live.values() for b in s.block_table]
        assert sum(self.bm.ref_count(b) for b in set(held)) == len(held)
        assert self.bm.num_free_blocks == self.bm.num_blocks - len(set(held))

    def advance(self, s):
        seq, n = s.seq, s.num_new_tokens
        if s.is_prefill:
            seq.num_computed_tokens += n
            new = [model_token(seq.id, seq.num_tokens)] if s.samples else []
        else:  # verify [last, d1..dk]: accept the drafts the model agrees with, plus one more
            drafts = list(seq.draft_tokens)
            accepted = 0
            while accepted < len(drafts) and drafts[accepted] == model_token(seq.id, seq.num_tokens + accepted):
                accepted += 1
            new = drafts[:accepted] + [model_token(seq.id, seq.num_tokens + accepted)]
            seq.num_computed_tokens += 1 + accepted
        room = seq.params.max_tokens - seq.num_output_tokens
        for t in new[:room]:
            seq.append_token(t)
        self.bm.commit(seq)
        if seq.num_output_tokens >= seq.params.max_tokens:
            self.sched.finish(seq, FinishReason.LENGTH)
            self.finished.append(self.live.pop(seq.id))
        elif new and self.drafts:
            k = self.config.num_speculative_tokens
            if self.drafts == "right":
                seq.draft_tokens = [model_token(seq.id, seq.num_tokens + i) for i in range(k)]
            else:
                seq.draft_tokens = [0] * k  # the model never emits 0

    def run(self, max_steps: int = 10_000):
        steps = 0
        while self.sched.has_unfinished:
            self.step()
            steps += 1
            assert steps < max_steps, "the scheduler stopped making progress"
        assert not self.live
        assert self.bm.num_free_blocks == self.bm.num_blocks
        for seq in self.finished:
            assert seq.status == SequenceStatus.FINISHED and seq.finish_reason == FinishReason.LENGTH
            assert list(seq.tokens) == expected_tokens(seq, seq.params.max_tokens)
        return steps


def test_token_budget_respected_and_all_blocks_freed():
    eng = SimEngine(64, 4, max_tokens_per_batch=64)
    for i in range(6):
        eng.add(i, 30, max_tokens=5)
    eng.run()
    assert max(o.num_tokens for o in eng.outputs) == 64
    assert len(eng.finished) == 6


def test_max_seqs_respected():
    eng = SimEngine(64, 4, max_seqs_per_batch=3)
    for i in range(10):
        eng.add(i, 5, max_tokens=4)
    eng.run()
    assert max(len(o.scheduled) for o in eng.outputs) == 3
    assert eng.admissions == list(range(10))  # FCFS


def test_chunked_prefill_splits_long_prompt_and_mixes_with_decodes():
    eng = SimEngine(64, 4, max_tokens_per_batch=32)
    eng.add(0, 4, max_tokens=20)
    long = eng.add(1, 100, max_tokens=3)
    chunks, mixed = [], False
    while eng.sched.has_unfinished:
        out = eng.step()
        by_id = {s.seq_id: s for s in out.scheduled}
        if 1 in by_id and by_id[1].is_prefill:
            chunks.append((by_id[1].num_new_tokens, by_id[1].samples))
            if 0 in by_id and not by_id[0].is_prefill:
                mixed = True
    assert chunks[0] == (28, False)  # the short prompt's 4 tokens share the first step
    assert all(n == 31 for n, _ in chunks[1:-1])  # beside one decode each
    assert sum(n for n, _ in chunks) == 100 and chunks[-1][1]
    assert mixed
    assert list(long.tokens) == expected_tokens(long, 3)
    assert eng.bm.num_free_blocks == eng.bm.num_blocks


def test_chunked_prefill_off_keeps_prompts_whole():
    eng = SimEngine(64, 4, max_tokens_per_batch=32, enable_chunked_prefill=False)
    eng.add(0, 4, max_tokens=3)
    eng.add(1, 30, max_tokens=3)  # does not fit beside prompt 0's 4 tokens
    eng.add(2, 100, max_tokens=3)  # larger than any batch: runs whole, alone
    eng.run()
    for out in eng.outputs:
        for s in out.scheduled:
            if s.is_prefill:
                assert s.samples, "a prompt was split with chunked prefill off"
    first = [[(s.seq_id, s.num_new_tokens) for s in o.scheduled] for o in eng.outputs[:2]]
    assert first[0] == [(0, 4)]
    assert first[1] == [(0, 1), (1, 30)]
    alone = [o for o in eng.outputs if any(s.seq_id == 2 and s.is_prefill for s in o.scheduled)]
    assert len(alone) == 1 and [(s.seq_id, s.num_new_tokens) for s in alone[0].scheduled] == [(2, 100)]


@pytest.mark.parametrize("prefix_cache", [True, False])
def test_preemption_when_blocks_run_out(prefix_cache):
    eng = SimEngine(6, 4, prefix_cache=prefix_cache)
    for i in range(3):
        eng.add(i, 6, max_tokens=10)  # each needs 4 blocks by the end; 6 exist
    preemptions, readmit_first, victims = 0, None, []
    while eng.sched.has_unfinished:
        n_admitted = len(eng.admissions)
        out = eng.step()
        admitted = eng.admissions[n_admitted:]
        if out.preempted:
            preemptions += len(out.preempted)
            victims += [v.id for v in out.preempted]
            # Nothing is admitted in a step that had to preempt; the last one preempted
            # (the earliest admitted of them) is now at the front of the queue.
            assert admitted == []
            readmit_first = out.preempted[-1].id
        elif admitted and readmit_first is not None:
            assert admitted[0] == readmit_first  # preempted sequences go before anyone else
            readmit_first = None
    assert preemptions > 0 and readmit_first is None
    assert victims[0] == 2  # the most recently admitted goes first
    assert eng.bm.num_free_blocks == eng.bm.num_blocks
    assert sorted(s.id for s in eng.finished) == [0, 1, 2]
    for seq in eng.finished:
        assert list(seq.tokens) == expected_tokens(seq, 10)


def test_preempted_sequence_recomputes_with_prefix_cache_hits():
    eng = SimEngine(6, 4)
    for i in range(3):
        eng.add(i, 6, max_tokens=10)
    eng.run()
    assert eng.bm.prefix_cache_hits > 0  # its own committed blocks served the recompute
    assert eng.bm.prefix_cache_queries >= 18


def test_shared_prefix_hits_through_scheduler():
    eng = SimEngine(32, 4)
    a = Sequence(0, list(range(20)), SamplingParams(max_tokens=2))
    eng.sched.add(a)
    eng.live[0] = a
    eng.step()
    b = Sequence(1, list(range(16)) + [7, 7], SamplingParams(max_tokens=2))
    eng.sched.add(b)
    eng.live[1] = b
    out = eng.step()
    assert b.num_cached_tokens == 16
    assert [s.num_new_tokens for s in out.scheduled if s.seq_id == 1] == [2]
    eng.run()


def test_spec_decode_reserves_k_plus_one_slots():
    eng = SimEngine(16, 4, num_speculative_tokens=3)
    seq = eng.add(0, 5, max_tokens=12)
    out = eng.step()
    assert [(s.num_new_tokens, s.is_prefill) for s in out.scheduled] == [(5, True)]
    assert seq.num_computed_tokens == 5 and seq.num_tokens == 6
    seq.draft_tokens = [11, 12, 13]
    out = eng.sched.schedule()
    (s,) = out.scheduled
    assert s.num_new_tokens == 4 and not s.is_prefill
    assert len(seq.block_table) == 3  # positions 0..8 (5 computed + last + 3 drafts)
    eng.advance(s)  # wrong drafts: one token emitted
    assert seq.num_computed_tokens == 6 and seq.num_tokens == 7


@pytest.mark.parametrize("drafts", ["right", "wrong"])
@pytest.mark.parametrize("k", [1, 3])
def test_spec_decode_loop_gives_exact_output(drafts, k):
    eng = SimEngine(12, 4, drafts=drafts, num_speculative_tokens=k, max_tokens_per_batch=16)
    for i in range(4):
        eng.add(i, 3 + 2 * i, max_tokens=9)
    steps = eng.run()
    decodes = [s for o in eng.outputs for s in o.scheduled if not s.is_prefill]
    assert any(s.num_new_tokens == k + 1 for s in decodes)
    plain = SimEngine(12, 4, max_tokens_per_batch=16)
    for i in range(4):
        plain.add(i, 3 + 2 * i, max_tokens=9)
    plain_steps = plain.run()
    if drafts == "right":
        assert steps < plain_steps


def test_drafts_trimmed_to_budget_and_checked_against_k():
    eng = SimEngine(16, 4, num_speculative_tokens=3, max_tokens_per_batch=3)
    seq = eng.add(0, 3)
    eng.step()
    seq.draft_tokens = [1, 2, 3]
    (s,) = eng.sched.schedule().scheduled
    assert s.num_new_tokens == 3 and list(seq.draft_tokens) == [1, 2]
    eng.advance(s)
    seq.draft_tokens = [1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="num_speculative_tokens"):
        eng.sched.schedule()


def test_finish_mid_generation_frees_blocks():
    eng = SimEngine(16, 4)
    a = eng.add(0, 10, max_tokens=50)
    b = eng.add(1, 10, max_tokens=50)
    c = eng.add(2, 10, max_tokens=50)
    eng.sched.finish(c, FinishReason.ABORT)  # still waiting
    eng.live.pop(2)
    eng.step()
    eng.step()
    assert eng.bm.num_free_blocks < 16
    eng.sched.finish(a, FinishReason.ABORT)
    eng.live.pop(0)
    assert a.status == SequenceStatus.FINISHED and a.finish_reason == FinishReason.ABORT and a.block_table == []
    eng.sched.finish(a, FinishReason.STOP)  # a second finish changes nothing
    assert a.finish_reason == FinishReason.ABORT
    assert eng.sched.num_running == 1 and eng.sched.num_waiting == 0
    eng.sched.finish(b, FinishReason.ABORT)
    eng.live.pop(1)
    assert not eng.sched.has_unfinished and eng.bm.num_free_blocks == 16
    assert c.status == SequenceStatus.FINISHED


def test_sequence_too_large_for_the_cache_raises_and_can_be_aborted():
    eng = SimEngine(2, 4)
    big = eng.add(0, 12)
    with pytest.raises(RuntimeError, match="KV blocks"):
        eng.sched.schedule()
    eng.sched.finish(big, FinishReason.ABORT)
    assert not eng.sched.has_unfinished
    # A sole running sequence that outgrows the whole cache.
    grows = eng.add(1, 6, max_tokens=10)
    eng.step()
    eng.step()
    eng.step()
    with pytest.raises(RuntimeError, match="only 2 blocks"):
        eng.step()
    eng.sched.finish(grows, FinishReason.ABORT)
    assert eng.bm.num_free_blocks == 2


def test_scheduler_keeps_sequences_and_block_manager_alive():
    sched = Scheduler(SchedulerConfig(), BlockManager(8, 4, True))  # no other reference to either
    sched.add(Sequence(7, [1, 2, 3]))  # nor to the sequence
    import gc

    gc.collect()
    (s,) = sched.schedule().scheduled
    assert s.seq_id == 7 and s.seq.num_tokens == 3 and len(s.seq.block_table) == 1
    sched.finish(s.seq, FinishReason.ABORT)
    with pytest.raises(ValueError, match="already running or finished"):
        sched.add(s.seq)


@pytest.mark.parametrize(
    "field, value",
    [
        ("temperature", -0.5),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_k", -2),
        ("min_p", 1.5),
        ("max_tokens", 0),
        ("presence_penalty", 2.5),
        ("frequency_penalty", -3.0),
        ("logprobs", 21),
        ("logprobs", -2),
        ("stop_token_ids", [3, -1]),
    ],
)
def test_bad_sampling_params_raise_with_field_name(field, value):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**{field: value})
    params = SamplingParams()
    setattr(params, field, value)
    with pytest.raises(ValueError, match=rf"SamplingParams\.{field} must be .*, got -?\d"):
        params.validate()
    with pytest.raises(ValueError, match=field):
        Sequence(0, [1], params)


def test_sampling_params_defaults_and_greedy():
    p = SamplingParams()
    assert (p.temperature, p.top_p, p.top_k, p.max_tokens, p.logprobs, p.seed) == (1.0, 1.0, 0, 16, -1, None)
    assert not p.greedy
    assert SamplingParams(temperature=0.0).greedy and SamplingParams(top_k=1).greedy
    assert SamplingParams(seed=2**63 + 5).seed == 2**63 + 5


def test_bad_scheduler_config_raises():
    with pytest.raises(ValueError, match="max_tokens_per_batch"):
        SchedulerConfig(max_tokens_per_batch=0)
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        SchedulerConfig(num_speculative_tokens=-1)


@pytest.mark.parametrize("chunked", [True, False])
@pytest.mark.parametrize("prefix_cache", [True, False])
@pytest.mark.parametrize("k, drafts", [(0, None), (2, "right"), (3, "wrong")])
def test_random_mixed_workload_stays_consistent(chunked, prefix_cache, k, drafts):
    """Shared prefixes, a cache small enough to preempt, small budgets: every invariant holds
    on every step and every sequence ends with exactly the output it would have alone."""
    import random

    rng = random.Random(1234 + 7 * k + chunked + 2 * prefix_cache)
    eng = SimEngine(24, 4, prefix_cache=prefix_cache, drafts=drafts, num_speculative_tokens=k,
                    enable_chunked_prefill=chunked, max_tokens_per_batch=24, max_seqs_per_batch=5)
    shared = [5, 6, 7, 8, 9, 10, 11, 12]
    next_id = 0
    for _ in range(60):
        if next_id < 24 and rng.random() < 0.5:
            length = rng.randint(1, 30)
            tokens = (shared + [rng.randint(0, 50) for _ in range(length)])[: max(length, 1)]
            seq = Sequence(next_id, tokens, SamplingParams(max_tokens=rng.randint(1, 20)))
            eng.sched.add(seq)
            eng.live[next_id] = seq
            next_id += 1
        if eng.sched.has_unfinished:
            eng.step()
    eng.run()
    assert len(eng.finished) == next_id
    if prefix_cache:
        assert eng.bm.prefix_cache_hits > 0
