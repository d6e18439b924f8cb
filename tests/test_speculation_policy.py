"""The speculation policy alone, fed made-up step timings and verifications: it fits the costs, tracks
acceptance per position and per sequence, and picks the k (and the per-sequence drafts) that the
requests' expected mean time per token favours."""
import pytest

from mtpserve import _C

K_MAX = 3
ADAPTIVE, FIXED = _C.SpeculationPolicyKind.adaptive, _C.SpeculationPolicyKind.fixed


def candidates(n, budget=K_MAX, context=100, first_id=0, stashed=0):
    return [(first_id + i, budget, context, False, stashed) for i in range(n)]


PER_CONTEXT_TOKEN = 1e-8


def feed_costs(policy, n, per_row, fixed=1e-3, draft_fixed=2e-4, per_recursion=5e-4, per_fill_row=1e-6):
    """Verify and draft steps of n sequences and each k, timed by exact linear laws."""
    for k in range(K_MAX + 1):
        for step in range(30):
            rows, context = n * (1 + k) - step % n, 100 * n + 977 * step
            policy.record_verify(n, k, rows, context, fixed + per_row * rows + PER_CONTEXT_TOKEN * context)
            fill, rec_rows = n + step % (k * n + 1), max(k - 1, 0) * (n - step % n)
            policy.record_draft(n, fill, max(k - 1, 0), rec_rows, draft_fixed + per_fill_row * fill +
                                per_recursion * max(k - 1, 0) + per_row * rec_rows)


def feed_acceptance(policy, seq_id, accepted_of_3, times=50):
    for _ in range(times):
        policy.record_acceptance(seq_id, 3, accepted_of_3)


def new_sequences(n, step):
    """Step `step`'s batch of n sequences never seen before: none builds a streak of failed plans (where every
    step fills, one that has would draft or retire, and these tests are not about that)."""
    return candidates(n, first_id=1000 + n * step)


def past_warmup(policy, batch):
    for _ in range(policy.warmup_rounds * (K_MAX + 1)):
        policy.plan(batch)


def gpu_like_policy():
    """Every step fills, batches of 8 past their warm-up, and verify rows nearly free: a GPU's costs."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    past_warmup(policy, candidates(8))
    feed_costs(policy, 8, per_row=1e-6, draft_fixed=3e-4, per_recursion=2e-4)
    return policy


def test_warmup_cycles_k_in_each_batch_size_bucket_and_probes_recur():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(4)
    ks = [policy.plan(batch)[0] for _ in range(policy.warmup_rounds * (K_MAX + 1))]
    assert ks == [i % (K_MAX + 1) for i in range(len(ks))]
    assert policy.plan(candidates(8))[0] == 0  # a new bucket warms up on its own
    feed_costs(policy, 4, per_row=1e-3)  # rows so dear that drafting never pays
    feed_acceptance(policy, 0, 0)
    ks = [policy.plan(new_sequences(4, i))[0] for i in range(7 * policy.probe_interval)]
    # Probes skip the chosen k = 0 and take k = 1, 2, 3 in turn, each interval twice the last while the
    # choice holds.
    probes = [(i, k) for i, k in enumerate(ks) if k != 0]
    assert probes == [(policy.probe_interval * (2 ** (p + 1) - 1) - 1, p + 1) for p in range(3)]


def k0_probe_steps(per_row, draft_fixed, per_recursion, plans):
    """A batch of 4 whose drafts are always rejected, with deferred fills, past its warm-up: the plans that draft."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    batch = candidates(4)
    past_warmup(policy, batch)
    feed_costs(policy, 4, per_row=per_row, draft_fixed=draft_fixed, per_recursion=per_recursion)
    feed_acceptance(policy, 0, 0)
    ks = [policy.plan(batch)[0] for _ in range(plans)]
    return [i for i, k in enumerate(ks) if k != 0]


def bursts_every(interval, count):
    """Bursts of k = 1..K_MAX, the first ending at step probe_interval - 1 (after the warm-up), each next `interval`
    steps after the one before."""
    ends = [_C.SpeculationPolicy.probe_interval - 1 + interval * b for b in range(count)]
    return [end - K_MAX + 1 + j for end in ends for j in range(K_MAX)]


def test_at_k0_with_deferred_fills_probes_are_paced_by_their_cost():
    """Nothing between probes measures the drafting there, so a stale estimate must not make probes rarer; their cost
    does. Where rows are dear, each burst after the first comes when the one before has taken probe_budget of the time
    since: here a k = 1 / 2 / 3 step is 1.84 / 3.54 / 5.24 k = 0 steps by feed_costs's laws (1 ms a row and 1 ms a
    step to verify; 0.2 ms a draft step, and 0.5 ms plus 1 ms a row for each recursion), 7.62 k = 0 steps more in all.
    Where rows and drafts cost little (a burst 0.47 k = 0 steps more), every probe_interval."""
    policy = _C.SpeculationPolicy
    dear = round((0.840 + 2.539 + 4.237) / policy.probe_budget)
    assert dear > policy.probe_interval
    assert k0_probe_steps(1e-3, 2e-4, 5e-4, 3 * dear) == bursts_every(dear, 3)
    interval = policy.probe_interval
    assert k0_probe_steps(1e-5, 2e-5, 2e-5, 4 * interval) == bursts_every(interval, 4)


def test_probes_keep_their_interval_while_another_k_is_estimated_close_to_the_choice():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(4)
    past_warmup(policy, batch)
    feed_costs(policy, 4, per_row=1e-4)
    feed_acceptance(policy, 0, 2)  # the third draft always rejected: k = 1 and k = 2 estimated close
    ks = [policy.plan(batch)[0] for _ in range(7 * policy.probe_interval)]
    chosen = max(set(ks), key=ks.count)
    assert [i for i, k in enumerate(ks) if k != chosen] == [policy.probe_interval * (p + 1) - 1 for p in range(7)]


def test_a_probe_at_k0_fills_where_the_estimate_drafts_and_defers_where_it_does_not():
    """With deferred fills, a probe at k = 0 while the estimate drafts fills as it goes (the next step then has
    nothing to catch up, which runs eagerly on a GPU); a k = 0 plan the estimate chose defers."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    batch = candidates(8)
    past_warmup(policy, batch)
    feed_costs(policy, 8, per_row=1e-6)
    feed_acceptance(policy, 100, 3)
    plans = [policy.plan(batch) for _ in range(policy.probe_interval)]
    assert plans[0][0] == K_MAX and plans[0][4] == [False] * 8
    probe = plans[policy.probe_interval - 1]
    assert probe[0] == 0 and probe[4] == [False] * 8
    feed_costs(policy, 8, per_row=1e-3)  # rows now so dear that the estimate gives no drafts
    feed_acceptance(policy, 100, 0, times=200)
    step_k, _, _, _, defer = policy.plan(batch)
    assert step_k == 0 and defer == [True] * 8


def test_probes_come_back_when_the_choice_changes():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(4)
    past_warmup(policy, batch)
    feed_costs(policy, 4, per_row=1e-4)
    feed_acceptance(policy, 0, 0)  # drafts always rejected: k = 0 pays best
    ks = [policy.plan(new_sequences(4, i))[0] for i in range(7 * policy.probe_interval)]
    assert sum(k != 0 for k in ks) == 3  # the interval has grown to 4 times the first
    feed_acceptance(policy, 0, 3, times=200)  # now always accepted: drafting pays
    ks = [policy.plan(new_sequences(4, i))[0] for i in range(policy.probe_interval + 1)]
    assert ks[0] > 0 and any(k != ks[0] for k in ks[1:])  # the next probe within the first interval


def test_with_deferred_fills_a_stale_drafting_cost_is_probed_and_replaced():
    """A drafting cost measured 8 times too high in the warm-up (a co-tenant) holds k = 0 at first; k = 0
    steps that defer their fills measure no drafting, so the first probes (all k >= 1 in a row) must
    replace the stale estimate rather than nudge it: drafting, which pays, resumes there for good."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    stashed, ks = 0, []
    for i in range(3 * policy.probe_interval):
        k = policy.plan([(7, K_MAX, 100, False, stashed)])[0]
        ks.append(k)
        slow = 8 if i < policy.warmup_rounds * (K_MAX + 1) else 1
        policy.record_verify(1, k, 1 + k, 100, 5e-3 + 1e-4 * (1 + k))
        if k > 0:
            fill = 1 + k + stashed
            policy.record_draft(1, fill, k - 1, k - 1, slow * (1.2e-3 + 2e-5 * fill + 1e-3 * (k - 1)))
            policy.record_acceptance(7, k, k)
            stashed = 0
        else:
            stashed += 1
    warmup = policy.warmup_rounds * (K_MAX + 1)
    first_probe = warmup + policy.probe_interval - K_MAX
    assert ks[warmup:first_probe] == [0] * (first_probe - warmup)  # the stale estimate holds k = 0 ...
    assert ks[first_probe:first_probe + K_MAX] == [1, 2, 3]
    assert all(k > 0 for k in ks[first_probe:])  # ... until the probes replace it


def test_steps_with_drafts_after_many_without_leave_k0_priced_as_its_own_steps_measured():
    """A batch of 64 on a CPU: k = 1 measured early, then 100 steps at k = 0 that ran slower (30 ms), then two steps
    at k = 1. The steps at k = 1 reprice k = 1, and k = 0's price stays what its own steps took: when the line aged
    every older sample at a step with drafts after a gap, the two were left alone to set its context slope, and
    k = 0 was priced 30% dearer."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    n = 64
    for step in range(30):
        policy.record_verify(n, 1, 2 * n, 2000 + 128 * step, 0.040 + 1e-6 * step)
        policy.record_verify(n, 0, n, 2064 + 128 * step, 0.025 + 1e-6 * step)
    for step in range(100):
        policy.record_verify(n, 0, n, 6000 + 64 * step, 0.030)
    policy.record_verify(n, 1, 2 * n, 12500, 0.045)
    policy.record_verify(n, 1, 2 * n, 12700, 0.046)
    assert policy.verify_seconds(n, 0, n, 12800) == pytest.approx(0.030, rel=0.03)
    assert policy.verify_seconds(n, 1, 2 * n, 12800) == pytest.approx(0.046, rel=0.03)


def test_the_verify_cost_fit_recovers_a_linear_law():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    feed_costs(policy, 16, per_row=2e-5)
    assert policy.verify_seconds(16, 1, 40, 4000) == pytest.approx(1e-3 + 2e-5 * 40 + PER_CONTEXT_TOKEN * 4000,
                                                                   rel=1e-3)
    assert policy.verify_seconds(31, 1, 40, 4000) == policy.verify_seconds(16, 1, 40, 4000)  # one batch-size bucket
    assert policy.verify_seconds(32, 1, 40, 4000) == 0  # nothing measured at 32..63 sequences yet


def one_sequence_costing(policy, verify, draft):
    """Past the warm-up of a batch of one, steps of each k timed verify[k] and draft[k] (the fill alone at k = 0
    and 1, then recursions); returns the batch."""
    batch = [(0, K_MAX, 100, False, 0)]
    past_warmup(policy, batch)
    for step in range(40):
        for k in range(K_MAX + 1):
            policy.record_verify(1, k, 1 + k, 100 + step, verify[k])
            policy.record_draft(1, 1 + k, max(k - 1, 0), max(k - 1, 0), draft[k])
    return batch


def test_a_step_cost_that_is_not_linear_in_k_is_learned_per_k():
    """Batch 1 on the CPU: verifying 3 rows per sequence took longer than 4 (a GEMM's kernel choice). A line
    through the four k's would pick k = 1 here; the per-k offsets price each k as measured, and k = 3 pays."""
    verify = [5.2e-3, 6.1e-3, 7.4e-3, 6.0e-3]
    draft = [1.5e-3, 1.7e-3, 3.3e-3, 4.6e-3]
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = one_sequence_costing(policy, verify, draft)
    for accepted in [3] * 9 + [2] * 3 + [1] * 4 + [0] * 4:
        policy.record_acceptance(0, 3, accepted)
    for k in range(K_MAX + 1):
        assert policy.verify_seconds(1, k, 1 + k, 120) == pytest.approx(verify[k], rel=0.02)
        assert policy.draft_seconds(1, 1 + k, max(k - 1, 0), max(k - 1, 0)) == pytest.approx(draft[k], rel=0.02)
    assert policy.plan(batch)[0] == K_MAX


def test_cheap_rows_and_high_acceptance_draft_k_max():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(8)
    past_warmup(policy, batch)
    feed_costs(policy, 8, per_row=1e-6)
    feed_acceptance(policy, 100, 3)
    assert policy.plan(batch)[:2] == (K_MAX, [K_MAX] * 8)


def test_the_plan_is_never_rated_below_a_uniform_k():
    """Trimming judges each draft at its plan's mean rate, which can drop every draft of the best k: here k = 1
    (estimated 5.7 tokens per ms against 4.9 at k = 2 and 4.4 at k = 0) once lost all its drafts, and the
    policy chose k = 2. The uniform plan stands where its trimmed version is rated lower."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    past_warmup(policy, candidates(8))
    feed_costs(policy, 8, per_row=1e-4)
    feed_acceptance(policy, 100, 3)
    assert policy.plan(candidates(8))[:2] == (1, [1] * 8)


def test_dear_rows_and_low_acceptance_draft_nothing():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(64)
    past_warmup(policy, batch)
    feed_costs(policy, 64, per_row=1e-4)
    feed_acceptance(policy, 100, 0)
    assert policy.plan(batch)[:2] == (0, [0] * 64)


def test_waiting_positions_do_not_hold_back_drafts_that_pay():
    """With fills deferred at k = 0 (fill_every > 1) a sequence's waiting positions are caught up whatever the
    plan (k = 0 does it once the stash is full), so drafts that pay resume with 64 positions waiting too."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    past_warmup(policy, candidates(8))
    feed_costs(policy, 8, per_row=1e-4, draft_fixed=5e-4, per_recursion=1e-4, per_fill_row=2e-5)
    feed_acceptance(policy, 100, 3)
    assert policy.plan(candidates(8))[0] > 0
    assert policy.plan(candidates(8, stashed=64))[0] > 0


def retiring_policy(n, first_id=0):
    """Deferred fills, costs where a draft row is dear, past the warm-up, no probe due for a while."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    past_warmup(policy, candidates(n, first_id=first_id))
    feed_costs(policy, n, per_row=2e-5)
    return policy


def test_a_full_stash_retires_a_sequence_whose_drafts_do_not_pay_and_no_other():
    policy = retiring_policy(8)
    feed_acceptance(policy, 0, 0, times=20)  # always rejected
    for seq_id in range(1, 8):
        feed_acceptance(policy, seq_id, 3, times=20)  # always accepted
    full = [(i, K_MAX, 100, False, 64) for i in range(8)]
    step_k, drafts, retire, _, _ = policy.plan(full)
    assert drafts[0] == 0 and drafts[1:] == [step_k] * 7 and retire == [True] + [False] * 7
    # Not yet full, or pinned: never retired.
    assert policy.plan([(0, K_MAX, 100, False, 63)] + full[1:])[2] == [False] * 8
    assert policy.plan([(0, K_MAX, 100, True, 64)] + full[1:])[2] == [False] * 8


# Accepted 85% of the time at each position, in no particular order (the records forget: a run of rejections
# last would weigh more).
ACCEPTED_85 = [3, 1, 3, 0, 3, 2, 3, 3, 1, 3, 0, 3, 3, 2, 3, 1, 3, 0, 3, 3]


def test_with_deferred_fills_well_accepted_drafts_that_do_not_pay_are_dropped_not_retired():
    """Where drafts that are always accepted would gain 1.05x (k = 1, a verify row costing what a one-row step
    does) and drafts accepted 85% of the time would not, the load is to blame as much as their acceptance (a 10%
    drift of the costs flips it): what waits is dropped, and a full stash does not retire them. (On a CPU at
    c = 64-80 such sequences retired for good, 27-78 per run, and the steps ran k = 0 a quarter of the time.)
    Drafts never accepted retire."""
    def plan_for(accepted_of_3):
        policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
        past_warmup(policy, candidates(8))
        feed_costs(policy, 8, per_row=1e-3)
        for seq_id in range(8):
            for accepted in accepted_of_3 * (40 // len(accepted_of_3)):
                policy.record_acceptance(seq_id, 3, accepted)
        return policy.plan([(i, K_MAX, 100, False, 64) for i in range(8)])

    assert plan_for([3])[0] == 1  # always accepted: drafting pays
    step_k, _, retire, drop, _ = plan_for(ACCEPTED_85)
    assert step_k == 0 and retire == [False] * 8 and drop == [True] * 8
    assert plan_for([0])[2] == [True] * 8


def test_drafts_never_accepted_retire_even_where_a_step_with_drafts_was_measured_cheaper():
    """A CPU GEMM can run more rows in less time, and the per-k offsets price each k as measured: here a step
    verifying one draft per sequence (and filling) cost less than one without. Drafts that are never accepted add
    no token all the same, so they do not pay, and a full stash retires the sequence."""
    verify = [6.1e-3, 5.2e-3, 7.4e-3, 6.0e-3]
    draft = [1.5e-4, 3.0e-4, 1.6e-3, 2.9e-3]
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    one_sequence_costing(policy, verify, draft)
    feed_acceptance(policy, 0, 0, times=20)
    assert policy.plan([(0, K_MAX, 100, False, 64)])[2] == [True]


def test_where_every_step_fills_sequences_retire_after_a_streak_of_plans_that_do_not_pay():
    """fill_every = 1 (a GPU's default): nothing is stashed, so no stash fills up. Where the plan the estimate
    favours is priced below k = 0 without any fill, each sequence counts a failed plan; retire_streak in a row
    retire it once its own acceptance is known (until then it drafts, whatever the estimate). Where one
    sequence's drafts pay for the batch, none counts; a sequence whose drafts would beat a step without MTP were
    every sequence's like its own never counts."""
    def policy_with(accepted_of_3, **costs):
        policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
        past_warmup(policy, candidates(8))
        feed_costs(policy, 8, per_row=2e-5, **costs)
        for seq_id, accepted in enumerate(accepted_of_3):
            feed_acceptance(policy, seq_id, accepted, times=20)
        return policy

    streak = _C.SpeculationPolicy.retire_streak
    policy = policy_with([0] * 8)
    plans = [policy.plan(candidates(8)) for _ in range(streak)]
    assert [any(retire) for _, _, retire, _, _ in plans] == [False] * (streak - 1) + [True]
    assert plans[-1][:3] == (0, [0] * 8, [True] * 8)
    unknown = policy_with([0] * 7)  # sequence 7 has no record of its own yet
    at_streak = [unknown.plan(candidates(8)) for _ in range(streak)][-1]
    # It is not retired, and rather than pay its fill for nothing it drafts, to learn what retiring it needs.
    assert at_streak[2] == [True] * 7 + [False] and at_streak[1][7] >= 1
    feed_acceptance(unknown, 7, 0, times=8)  # now it has: its streak has run on meanwhile
    assert unknown.plan(candidates(8))[2] == [True] * 8
    cheap = dict(draft_fixed=2e-5, per_recursion=2e-5)  # one sequence's accepted drafts pay for the fill
    mixed = policy_with([0] * 7 + [3], **cheap)
    assert not any(any(mixed.plan(candidates(8))[2]) for _ in range(3 * streak))
    rejected = policy_with([0] * 8, **cheap)
    assert any(any(rejected.plan(candidates(8))[2]) for _ in range(streak))
    # Where the batch fails for the others' drafts, a sequence whose drafts would beat a step without MTP were
    # all like it counts none.
    accepted_one = policy_with([0] * 7 + [3])
    assert [accepted_one.plan(candidates(8)) for _ in range(streak)][-1][2] == [True] * 7 + [False]
    assert not any(accepted_one.plan(candidates(8))[2][7] for _ in range(3 * streak))
    # Verify rows nearly free and a dear fill (a GPU): draft 1 accepted 1 time in 7 beats k = 0 with its fill,
    # not k = 0 without; such sequences still retire.
    gpu_like = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    past_warmup(gpu_like, candidates(8))
    feed_costs(gpu_like, 8, per_row=1e-6, draft_fixed=5e-4, per_recursion=5e-4)
    for seq_id in range(8):
        for accepted in [1] + [0] * 6:
            gpu_like.record_acceptance(seq_id, 1, accepted)
    assert [gpu_like.plan(candidates(8)) for _ in range(streak)][-1][2] == [True] * 8


def test_where_every_step_fills_drafts_that_would_pay_only_narrowly_hold_a_streak_and_clear_ones_restart_it():
    """In a batch that fails for the others' drafts, a sequence whose drafts would beat a step without MTP were every
    sequence's like its own counts no failed plan. Where they would beat it only narrowly (draft 1 accepted 2 times
    in 3), its streak holds: the failures before and after add up. Where they would beat it clearly
    (always accepted), the streak starts again. (On the H100, drafts accepted 1 time in 4 or 5 passed narrowly now
    and then; when each pass restarted the streak, the fill ran for the whole batch until the last retired.)"""
    streak = _C.SpeculationPolicy.retire_streak

    def failing_batch():
        policy = gpu_like_policy()
        for seq_id in range(7):
            feed_acceptance(policy, seq_id, 0, times=20)
        feed_acceptance(policy, 7, 3, times=20)
        assert [policy.plan(candidates(8))[2][6] for _ in range(streak - 1)] == [False] * (streak - 1)
        return policy

    narrow = failing_batch()
    for _ in range(5):
        for accepted in (2, 2, 0):
            narrow.record_acceptance(6, 3, accepted)
    assert not any(narrow.plan(candidates(8))[2][6] for _ in range(3))
    feed_acceptance(narrow, 6, 0, times=20)
    assert narrow.plan(candidates(8))[2] == [True] * 7 + [False]  # its sixth failed plan
    clear = failing_batch()
    feed_acceptance(clear, 6, 3, times=20)
    assert not clear.plan(candidates(8))[2][6]
    feed_acceptance(clear, 6, 0, times=20)
    assert [clear.plan(candidates(8))[2][6] for _ in range(streak)] == [False] * (streak - 1) + [True]


def test_where_every_step_fills_a_few_lucky_drafts_do_not_restart_a_streak():
    """A sequence whose last 3 of 5 drafts were accepted, in a batch whose drafts fail: its estimate would pass, but
    its acceptance less one standard error does not, so it counts failed plans and retires with the others. (On the
    H100 at temperature 1.5, such sequences kept the fill running for a batch of 32 long after the rest could
    retire.)"""
    policy = gpu_like_policy()
    for seq_id in range(7):
        feed_acceptance(policy, seq_id, 0, times=20)
    for accepted in (0, 0, 1, 1, 1):
        policy.record_acceptance(7, 1, accepted)
    plans = [policy.plan(candidates(8)) for _ in range(_C.SpeculationPolicy.retire_streak)]
    assert plans[-1][2] == [True] * 8


HOT = 16  # the sampling class of temperature 1.5


def classes_failing_record(policy, first_id: int) -> None:
    """Eight sequences of the hot class, each with 20 verifications of 3 drafts none accepted."""
    policy.plan([(first_id + i, K_MAX, 100, False, 0, HOT) for i in range(8)])
    for seq_id in range(first_id, first_id + 8):
        feed_acceptance(policy, seq_id, 0, times=20)


def new_sequences_retired_in_a_row(policy, first_id: int) -> int:
    """New sequences of the hot class, eight to a plan, until one is not retired: how many were before it."""
    taken = 0
    while True:
        retired = policy.plan([(first_id + taken + i, K_MAX, 100, False, 0, HOT) for i in range(8)])[2]
        if not all(retired):
            return taken + retired.index(False)
        taken += 8
        assert taken <= policy.class_trust


def assert_a_failing_class_retires_new_sequences_at_their_first_plan(policy):
    """Once a sampling class's record weighs enough and says (even one standard error high) that its drafts would not
    pay, a new sequence of that class retires at its first plan, before its prompt's fill; one of another class does
    not. After class_trust of them the record is forgotten, so that the class's new sequences draft again and measure
    it anew."""
    greedy = 0
    classes_failing_record(policy, 0)
    first = policy.plan([(100 + i, K_MAX, 100, False, 0, HOT) for i in range(7)]
                        + [(200, K_MAX, 100, False, 0, greedy)])
    assert first[2] == [True] * 7 + [False]
    assert new_sequences_retired_in_a_row(policy, 1000) == policy.class_trust - 7


def test_where_every_step_fills_a_new_sequence_of_a_class_whose_drafts_fail_retires_at_its_first_plan():
    """There the test is the batch's: the class's drafts would not beat a step without MTP."""
    assert_a_failing_class_retires_new_sequences_at_their_first_plan(gpu_like_policy())


def test_with_deferred_fills_a_new_sequence_of_a_class_whose_drafts_fail_retires_at_its_first_plan():
    """Where fills wait (a CPU) too, by that path's test (the class's acceptance is to blame, not the load), instead
    of filling until its own record is known and then stashing until its stash is full."""
    assert_a_failing_class_retires_new_sequences_at_their_first_plan(retiring_policy(8))


def test_a_class_is_taken_at_its_word_from_about_as_many_verifications_as_prove_a_sequence():
    """Twenty verifications of draft 1, what two requests give at batch 1 before they retire, make a class's record
    known: a new sequence of a failing class then retires at its first plan. Ten, one request's, do not. (Known only
    from 64, the record took some ten requests at batch 1, and each paid its prompt's fill and its steps before
    retiring.)"""
    for policy in (gpu_like_policy(), retiring_policy(8)):
        policy.plan([(i, K_MAX, 100, False, 0, HOT) for i in range(8)])
        feed_acceptance(policy, 0, 0, times=10)
        assert not any(policy.plan([(100 + i, K_MAX, 100, False, 0, HOT) for i in range(8)])[2])
        feed_acceptance(policy, 1, 0, times=10)
        assert all(policy.plan([(200 + i, K_MAX, 100, False, 0, HOT) for i in range(8)])[2])


def test_a_class_judges_a_sequence_once_when_it_first_sees_it():
    """Sequences first planned for before their class's record was known are not retired by it once it is: the
    class's verdict rests on one plan's cost estimate and is for good, and their own records judge them instead,
    over a streak of plans. New sequences beside them still retire at their first plan. (On a loaded CPU, a class
    that became known a few steps into a request retired a sequence whose drafts were all accepted.)"""
    for policy in (gpu_like_policy(), retiring_policy(8)):
        early = [(100 + i, K_MAX, 100, False, 0, HOT) for i in range(4)]
        assert not any(policy.plan(early + [(200 + i, K_MAX, 100, False, 0, HOT) for i in range(4)])[2])
        classes_failing_record(policy, 0)
        assert policy.plan(early + [(300 + i, K_MAX, 100, False, 0, HOT) for i in range(4)])[2] == [False] * 4 + [True] * 4


def test_a_sequence_first_planned_for_where_no_step_was_timed_meets_its_class_at_its_first_timed_plan():
    """No step of one sequence was ever timed here (the batches ran eight at a time), so a first plan of one new
    sequence gives its known failing class no costs to judge it by: it is not retired then, and not yet counted as
    seen. At its next plan, in a batch whose steps were timed, the class retires it with the new ones beside it. (A
    request admitted alone to an engine whose batches of 80 came one request at a time filled until its own record
    retired it: 6-7 steps with fills per batch on a CPU, none when the batch was added at once.)"""
    for policy in (gpu_like_policy(), retiring_policy(8)):
        classes_failing_record(policy, 0)
        past_warmup(policy, candidates(1, first_id=50))
        alone = (500, K_MAX, 100, False, 0, HOT)
        assert policy.plan([alone])[2] == [False]
        assert policy.plan([alone] + [(600 + i, K_MAX, 100, False, 0, HOT) for i in range(7)])[2] == [True] * 8


def test_a_known_class_vouches_for_its_new_sequences_so_that_they_need_not_fill_to_measure_their_own():
    """With deferred fills, a sequence given no drafts still fills until its acceptance is known (the fill's draft 1
    measures it). A new sequence of a class whose record is known needs no such fills: the record vouches for it, as
    its own record does once known. One of a class not yet known is vouched for by nothing until its own record is
    known. (At batch 64 on a CPU, where no drafts paid, a batch of new greedy sequences otherwise filled on 5 of its
    127 steps.)"""
    greedy = 0
    policy = retiring_policy(8)
    policy.plan([(i, K_MAX, 100, False, 0, greedy) for i in range(8)])
    feed_acceptance(policy, 0, 3, times=10)
    policy.plan([(100 + i, K_MAX, 100, False, 0, greedy) for i in range(8)])
    assert not policy.vouched_for(100)
    assert policy.vouched_for(0)  # its own record
    feed_acceptance(policy, 1, 3, times=10)
    policy.plan([(200 + i, K_MAX, 100, False, 0, greedy) for i in range(8)])
    assert policy.vouched_for(200) and policy.vouched_for(100)
    assert not policy.vouched_for(300)  # never planned for: of no class


def test_a_class_measured_anew_is_trusted_again_for_as_many_new_sequences():
    """Once the class's new record is known, the next class_trust new sequences retire again, every one. (A record
    that instead weighed a little less with each new sequence hovered at the threshold once it had fallen below it:
    each new sequence's few verifications lifted it back over, and four in ten new sequences drafted.)"""
    policy = gpu_like_policy()
    classes_failing_record(policy, 0)
    assert new_sequences_retired_in_a_row(policy, 100) == policy.class_trust
    classes_failing_record(policy, 10_000)
    assert new_sequences_retired_in_a_row(policy, 20_000) == policy.class_trust


def test_a_short_record_of_rejections_does_not_retire_a_sequence_the_estimate_still_drafts_for():
    """At batch 1 with deferred fills, a sequence whose first drafts were mostly rejected (1 in 6) measures poorly,
    while its estimate, which leans on the engine-wide one, still gives it drafts: it keeps drafting, and a full
    stash does not retire it. (On a CPU one such sequence retired for good while the estimate gave it 3.) Once its
    own record outweighs that prior, its rejections retire it."""
    def policy_after(rejections: int):
        policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
        past_warmup(policy, candidates(1))
        feed_costs(policy, 1, per_row=1e-5, per_recursion=1e-4)
        for seq_id in range(1, 9):
            feed_acceptance(policy, seq_id, 3, times=20)  # the engine-wide record: drafts accepted
        feed_acceptance(policy, 0, 3, times=1)
        feed_acceptance(policy, 0, 0, times=rejections)
        return policy

    full_stash = [(0, K_MAX, 100, False, 64)]
    _, drafts, retire, _, _ = policy_after(5).plan(full_stash)
    assert drafts[0] > 0 and retire == [False]
    _, drafts, retire, _, _ = policy_after(40).plan(full_stash)
    assert drafts == [0] and retire == [True]


def test_probes_skip_a_sequence_whose_drafts_fail():
    """Probes (one of these 50 plans) draft uniformly, but not for a sequence whose measured acceptance
    makes drafting not pay: that would only catch up its waiting positions."""
    policy = retiring_policy(2)
    feed_acceptance(policy, 0, 0, times=20)
    feed_acceptance(policy, 1, 3, times=20)
    batch = [(0, K_MAX, 100, False, 10), (1, K_MAX, 100, False, 10)]
    plans = [policy.plan(batch) for _ in range(policy.probe_interval)]
    assert all(drafts[0] == 0 for _, drafts, *_ in plans) and any(drafts[1] > 0 for _, drafts, *_ in plans)
    unfailing = retiring_policy(2)  # no acceptance record: both lean on the engine-wide estimate
    assert any(drafts[0] > 0 for _, drafts, *_ in (unfailing.plan(batch) for _ in range(policy.probe_interval)))


def test_retired_sequences_still_count_in_the_step_costs():
    """Beside 56 retired sequences, the policy plans for 8 with the 64-sequence bucket's costs: rows there so
    dear that drafting does not pay, though it would in a batch of 8."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    past_warmup(policy, candidates(8))
    past_warmup(policy, candidates(64))
    feed_costs(policy, 8, per_row=1e-6)
    feed_costs(policy, 64, per_row=1e-3)
    for seq_id in range(8):
        feed_acceptance(policy, seq_id, 2, times=20)
    assert policy.plan(candidates(8))[0] > 0
    assert policy.plan(candidates(8), retired_seqs=56, retired_context=5600)[0] == 0


def test_what_waits_for_a_sequence_that_would_not_draft_at_this_load_is_dropped_not_caught_up():
    """At 64 sequences rows are so dear that even drafts that are always accepted would not pay: the plan drops
    the waiting positions of every unpinned sequence instead of catching them up, and retires none of these
    sequences, whose drafts are good (they draft again once the load falls). At 8, where drafting pays,
    nothing is dropped; nor where no step has been timed yet."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    past_warmup(policy, candidates(8))
    past_warmup(policy, candidates(64))
    feed_costs(policy, 8, per_row=1e-6)
    # A verify row and a fill row each cost what a step of one row does (no fixed cost to share): one drafted
    # row is one more token at best, at two rows' price plus the drafting's.
    feed_costs(policy, 64, per_row=1e-3, fixed=1e-4, draft_fixed=2e-3, per_fill_row=1e-3)
    for seq_id in range(64):
        feed_acceptance(policy, seq_id, 3, times=20)
    step_k, drafts, retire, drop, _ = policy.plan(candidates(63, stashed=64) + [(63, 2, 100, True, 0)])
    assert (step_k, drafts) == (2, [0] * 63 + [2])
    assert retire == [False] * 64 and drop == [True] * 63 + [False]
    step_k, _, retire, drop, _ = policy.plan(candidates(8, stashed=64))
    assert step_k > 0 and retire == drop == [False] * 8
    # Where always-accepted drafts would just pay, new sequences judged by the engine's drafts (mostly
    # rejected) would not draft either: theirs are dropped (not retired: their own drafts never failed).
    marginal = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    past_warmup(marginal, candidates(64))
    feed_costs(marginal, 64, per_row=1e-3)
    feed_acceptance(marginal, 100, 0)
    _, _, retire, drop, _ = marginal.plan(candidates(63, first_id=200, stashed=10) + [(0, K_MAX, 100, False, 0)])
    assert retire == [False] * 64 and drop == [True] * 63 + [False]  # nothing waits for the last one
    untimed = _C.SpeculationPolicy(ADAPTIVE, K_MAX, fill_every=64)
    past_warmup(untimed, candidates(64))
    assert untimed.plan(candidates(64, stashed=64))[3] == [False] * 64


def test_a_pinned_sequence_drafts_its_budget_whatever_the_costs():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(63) + [(63, 2, 100, True, 0)]
    past_warmup(policy, batch)
    feed_costs(policy, 64, per_row=1e-4)
    feed_acceptance(policy, 100, 0)
    assert policy.plan(batch)[:2] == (2, [0] * 63 + [2])


def test_a_sequence_whose_drafts_fail_drafts_less_than_the_rest():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(8)
    past_warmup(policy, batch)
    feed_costs(policy, 8, per_row=2e-5)
    for seq_id in range(1, 8):
        feed_acceptance(policy, seq_id, 3, times=30)
    # Accepted about 1 time in 15: its draft adds less to the step's expected tokens than its verify row adds to the
    # step's time (at 1 in 5 it pays).
    feed_acceptance(policy, 0, 0, times=500)
    assert policy.sequence_acceptance(0)[0] < 0.07 and policy.sequence_acceptance(1)[0] > 0.75
    step_k, drafts, _, _, _ = policy.plan(batch)
    assert step_k > 0 and drafts[1:] == [step_k] * 7 and drafts[0] < step_k


def half_accepted_batch(output_tokens=(1, 1)):
    """Batch 8 on CPU-like costs: sequences 0-3 have every draft accepted, 4-7 their first draft only; their
    requests have output_tokens[0] and output_tokens[1] output tokens (equal unless given)."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    past_warmup(policy, candidates(8))
    feed_costs(policy, 8, per_row=1e-5, per_recursion=2e-4)
    for seq_id in range(4):
        feed_acceptance(policy, seq_id, 3, times=50)
    for seq_id in range(4, 8):
        feed_acceptance(policy, seq_id, 1, times=50)
    return policy, [c + (-1, output_tokens[c[0] >= 4]) for c in candidates(8)]


def test_the_step_k_minimises_the_requests_mean_tpot_where_output_lengths_are_equal():
    """The well-accepted requests leave sooner, so a step's sequences over-represent the others; counted once per
    request (each sequence by its tokens per step), the mean TPOT is the step's seconds per token. k = 3 costs about
    1.4x k = 1 and emits 4 x 4 + 4 x 2 = 24 tokens against 16; the second half still drafts one (its second draft
    fails). The mean over the step's sequences of their seconds per token, the objective before, chose k = 1."""
    policy, batch = half_accepted_batch()
    assert policy.plan(batch)[:2] == (3, [3] * 4 + [1] * 4)


def test_short_requests_weigh_more_in_the_mean_tpot():
    """The same batch where the poorly accepted requests are short (50 output tokens against 1,000), as on a CPU at
    64 ShareGPT requests: for every long request in the step's sequences some twenty short ones pass through, so
    the short ones' time per token is the mean TPOT. The step drafts their one good draft and the long ones' drafts
    no longer pay for the time they add."""
    policy, batch = half_accepted_batch(output_tokens=(1000, 50))
    assert policy.plan(batch)[:2] == (1, [0] * 4 + [1] * 4)


def test_a_retired_request_does_not_hold_back_the_drafts_beside_it():
    """An H200 at c = 2 (a step 0.58 ms, the fill 0.13, each recursion 0.1): beside a retired request, a sequence
    whose drafts are all accepted drafts 3. The mean of the two sequences' seconds per token chose 1 there, since the
    retired one emits a token a step whatever the step costs; but while it decodes, about three requests pass
    through the other slot, and each is one request of the mean TPOT as the retired one is."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    past_warmup(policy, candidates(2))
    feed_costs(policy, 2, per_row=1e-6, fixed=5.8e-4, draft_fixed=1.3e-4, per_recursion=1e-4)
    feed_acceptance(policy, 1, 3, times=50)
    assert policy.plan([(1, K_MAX, 100, False, 0)], retired_seqs=1, retired_context=100)[:2] == (3, [3])


def test_acceptance_is_conditional_per_position_and_new_sequences_start_from_the_engine():
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    for _ in range(200):
        policy.record_acceptance(0, 3, 1)  # draft 1 always accepted, draft 2 never; draft 3 never tested
        policy.record_acceptance(0, 3, 3)
    p = policy.engine_acceptance()
    assert p[0] == pytest.approx(1, abs=0.01) and p[1] == pytest.approx(0.5, abs=0.01)
    assert p[2] == pytest.approx(1, abs=0.01)
    assert policy.sequence_acceptance(7) == p


def test_a_position_no_plan_drafts_takes_the_estimate_of_the_one_before():
    """Draft 3 is measured only where plans draft it: had it stayed at even odds, the third draft of these well
    accepted drafts would look worth less than the row it adds, and k = 3 would never be drafted and measured."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(1)
    past_warmup(policy, batch)
    feed_costs(policy, 1, per_row=1e-4, per_recursion=1e-4)
    for i in range(100):  # plans of two drafts, both accepted 9 times in 10
        policy.record_acceptance(100 + i, 2, 2 if i % 10 else 1)
    p = policy.engine_acceptance()
    assert p[1] > 0.85 and p[2] == pytest.approx(p[1])
    assert policy.plan(batch)[:2] == (3, [3])


def sequence_1_past_warmup():
    """A policy past its warm-up at batch 1 (sequence 1), with costs under which a well-accepted third draft pays."""
    policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    batch = candidates(1, first_id=1)
    past_warmup(policy, batch)
    feed_costs(policy, 1, per_row=2e-4, per_recursion=2e-4)
    return policy, batch


def plans_of_sequence_1_accepting_every_draft(policy, batch, steps=200):
    """The step k of `steps` plans, each of whose drafts is then accepted."""
    ks = []
    for _ in range(steps):
        ks.append(policy.plan(batch)[0])
        policy.record_acceptance(1, ks[-1], ks[-1])
    return ks


def test_a_draft_position_measured_poorly_long_ago_is_drafted_and_measured_again():
    """Early verifications rejected draft 3; the plans then drafted two, which never test it. Had that early record
    stood (as it did until a probe), a sequence whose every draft is accepted would run k = 2 for good; as the steps
    go by without testing draft 3, its record gives way to the estimate of draft 2, and the plans draft it again."""
    policy, batch = sequence_1_past_warmup()
    for _ in range(5):
        policy.record_acceptance(0, 3, 2)
    assert policy.engine_acceptance()[2] < 0.2
    ks = plans_of_sequence_1_accepting_every_draft(policy, batch)
    assert ks[0] == 2
    assert ks[-100:].count(K_MAX) >= 90
    assert policy.engine_acceptance()[2] > 0.9


def test_a_sequence_that_stopped_drafting_a_position_drafts_it_again_as_its_record_ages():
    """The sequence's own early verifications rejected draft 3 while the engine's were accepted: leaning on its own
    record, it drafted two. Had that record stood (it was never tested again), the sequence would run k = 2 for good
    although its drafts are now always accepted; as its verifications go by without draft 3, the record gives way
    to the engine-wide estimate, and the plans draft three again."""
    policy, batch = sequence_1_past_warmup()
    for i in range(50):
        policy.record_acceptance(100 + i, 3, 3)
    for _ in range(5):
        policy.record_acceptance(1, 3, 2)
    assert policy.engine_acceptance()[2] > 0.85 and policy.sequence_acceptance(1)[2] < 0.5
    ks = plans_of_sequence_1_accepting_every_draft(policy, batch)
    assert ks[0] == 2
    assert ks[-100:].count(K_MAX) >= 90
    assert policy.sequence_acceptance(1)[2] > 0.85


def test_fixed_and_forced_plans_stay_within_each_budget():
    fixed = _C.SpeculationPolicy(FIXED, K_MAX)
    batch = [(0, 3, 10, False, 0), (1, 1, 10, False, 0), (2, 0, 10, False, 0)]
    assert fixed.plan(batch)[:2] == (3, [3, 1, 0])
    forced = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
    forced.force_schedule([2, 0])
    assert [forced.plan(batch)[:2] for _ in range(3)] == [(2, [2, 1, 0]), (0, [0, 0, 0]), (2, [2, 1, 0])]
    forced.force_schedule([2, 0], unpaid=[True, False, False])
    assert [forced.plan(batch)[3] for _ in range(4)] == [[True] * 3, [False] * 3, [False] * 3, [True] * 3]
