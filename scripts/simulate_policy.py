"""The adaptive speculation policy alone (mtpserve._C.SpeculationPolicy), driven through whole offline runs with
made-up step costs and drafts accepted at random: its tokens/s against k = 0 without MTP under the same cost law,
the steps it drafts, the steps that run the MTP fill, the sequences it retires. No model runs, so it takes seconds
and needs no GPU.

The cost law is linear like the policy's own model (a fixed step cost, a cost per verify row, a fixed fill
cost and one per recursion), with the fill paid on every step while any sequence still drafts (a GPU's default:
every step fills). Each sequence's acceptance per draft position is drawn uniformly from [(1 - spread) p,
(1 + spread) p] (at most 0.95): with equal-length requests, a batch's slowest sequence sets its number of steps.
The engine-wide acceptance starts from 300 verifications at p, as after earlier requests. A run is one batch
of equal-length requests (like scripts/bench_offline.py); the first 5 runs are the warm-up and not counted.
With --drift A the timings the policy is fed run 1 + A times slow for --drift-steps steps in every twice as many (a
co-tenant that comes and goes, as on the VMs this project measures on), while the seconds counted stay the law's:
what changes is only what the policy learns, so the score is of its choices alone.
    python3 scripts/simulate_policy.py --batch 32 --acceptance 0.15 0.8
"""
from __future__ import annotations

import argparse
import random

from mtpserve import _C

K_MAX = 3
WARMUP_RUNS = 5


class CostLaw:
    """Seconds of a verify step and of the drafting, as a GPU's: verify rows nearly free, the fill dear."""

    def __init__(self, step: float, per_row: float, per_drafted_step: float, fill: float, per_recursion: float):
        self.step, self.per_row, self.per_drafted_step = step, per_row, per_drafted_step
        self.fill, self.per_recursion = fill, per_recursion

    def verify(self, k: int, rows: int) -> float:
        return self.step + self.per_row * rows + (self.per_drafted_step if k else 0.0)

    def draft(self, fill_rows: int, recursions: int) -> float:
        return self.fill + 1e-7 * fill_rows + self.per_recursion * recursions


class Drift:
    """The machine's speed as the policy's timings see it: 1 + amplitude times slow for `steps` steps in every
    2 x `steps`, steady otherwise."""

    def __init__(self, amplitude: float, steps: int):
        self.amplitude, self.steps, self.step = amplitude, steps, 0

    def next(self) -> float:
        self.step += 1
        return 1 + self.amplitude if (self.step // self.steps) % 2 else 1.0


def trained_policy(kind, k_max: int, batch: int, law: CostLaw, p: float, rng: random.Random):
    """A policy past its warm-up at this batch size, its cost fits fed by the law, its engine-wide acceptance p."""
    policy = _C.SpeculationPolicy(kind, k_max)
    others = [(1_000_000 + i, k_max, 100, False, 0) for i in range(batch)]
    for _ in range(policy.warmup_rounds * (k_max + 1)):
        policy.plan(others)
    for k in range(k_max + 1):
        for step in range(30):
            rows, recursions = batch * (1 + k), max(k - 1, 0)
            policy.record_verify(batch, k, rows, 100 * batch + 37 * step, law.verify(k, rows))
            fill_rows = batch * (1 + (k > 0))
            policy.record_draft(batch, fill_rows, recursions, recursions * batch, law.draft(fill_rows, recursions))
    for _ in range(300):
        policy.record_acceptance(2_000_000, k_max, accepted_drafts(k_max, p, rng))
    return policy


def accepted_drafts(drafts: int, p: float, rng: random.Random) -> int:
    accepted = 0
    while accepted < drafts and rng.random() < p:
        accepted += 1
    return accepted


def one_run(policy, k_max: int, first_id: int, batch: int, tokens: int, law: CostLaw, p: float, spread: float,
            noise: float, drift: Drift, rng) -> tuple[float, list[int], int, int]:
    """One batch of requests to completion: its seconds under the law, its steps at each k, the steps that ran the
    MTP fill, the sequences retired."""
    left = {first_id + i: tokens for i in range(batch)}
    # Drawn from the sequence's id alone: every method meets the same sequences.
    own_p = {s: min(0.95, random.Random(s).uniform((1 - spread) * p, (1 + spread) * p)) for s in left}
    retired, seconds, steps_by_k, filled = set(), 0.0, [0] * (k_max + 1), 0
    while left:
        # One sampling class for all (as at one temperature): the class's record builds up over the runs.
        candidates = [(s, min(k_max, left[s] - 1), 100 + tokens - left[s], False, 0, 1) for s in left
                      if s not in retired]
        emitted = dict.fromkeys(left, 1)
        step_k, drafting = 0, False
        if candidates:
            step_k, drafts, retire, _, _ = policy.plan(candidates, len(left) - len(candidates), 0)
            for (s, *_), d, r in zip(candidates, drafts, retire):
                if r:
                    retired.add(s)
                    continue
                drafting = True
                if d:
                    emitted[s] += accepted_drafts(d, own_p[s], rng)
                    policy.record_acceptance(s, d, emitted[s] - 1)
        n, recursions = len(left), max(step_k - 1, 0)
        verify = law.verify(step_k, n * (1 + step_k))
        draft = law.draft(n, recursions) if drafting else 0.0
        seconds += verify + draft
        # The engine times every step and feeds the policy's cost model; a shared machine's timings jitter and drift.
        speed = drift.next()
        policy.record_verify(n, step_k, n * (1 + step_k), 100 * n, verify * speed * rng.lognormvariate(0, noise))
        if drafting:
            policy.record_draft(n, n, recursions, recursions * n, draft * speed * rng.lognormvariate(0, noise))
        steps_by_k[step_k] += 1
        filled += drafting
        for s in list(left):
            left[s] -= emitted[s]
            if left[s] <= 0:
                del left[s]
    return seconds, steps_by_k, filled, len(retired)


def simulate(kind, k_max: int, batch: int, tokens: int, law: CostLaw, p: float, spread: float, noise: float,
             drift: tuple[float, int], runs: int, seed: int) -> dict:
    rng, machine = random.Random(seed), Drift(*drift)
    policy = trained_policy(kind, k_max, batch, law, p, rng)
    seconds, steps_by_k, filled, retired = 0.0, [0] * (k_max + 1), 0, 0
    for r in range(WARMUP_RUNS + runs):
        run_seconds, run_steps, run_filled, run_retired = one_run(policy, k_max, r * batch, batch, tokens, law, p,
                                                                  spread, noise, machine, rng)
        if r >= WARMUP_RUNS:
            seconds += run_seconds
            steps_by_k = [a + b for a, b in zip(steps_by_k, run_steps)]
            filled += run_filled
            retired += run_retired
    plain = runs * tokens * law.verify(0, batch)
    return {"vs_k0": plain / seconds, "drafting_steps_per_run": sum(steps_by_k[1:]) / runs,
            "filled_steps_per_run": filled / runs,
            "retired_share": retired / (runs * batch), "steps_by_k": steps_by_k}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--acceptance", type=float, nargs="+", default=[0.15, 0.3, 0.8],
                        help="mean acceptance per draft position")
    parser.add_argument("--spread", type=float, default=0.5, help="sequences' acceptance: p times 1 +- this")
    parser.add_argument("--noise", type=float, default=0.05,
                        help="spread (log-normal sigma) of the step timings the policy is fed")
    parser.add_argument("--drift", type=float, default=0.0,
                        help="how much slower the policy's timings run in the machine's slow stretches")
    parser.add_argument("--drift-steps", type=int, default=500, help="steps in each slow or steady stretch")
    parser.add_argument("--tokens", type=int, default=128, help="output tokens per request")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-ms", type=float, default=0.6, help="a k = 0 step")
    parser.add_argument("--fill-ms", type=float, default=0.12, help="the MTP fill's fixed cost")
    parser.add_argument("--recursion-ms", type=float, default=0.05)
    args = parser.parse_args()
    law = CostLaw(args.step_ms * 1e-3, 1e-6, 3e-5, args.fill_ms * 1e-3, args.recursion_ms * 1e-3)
    fixed, adaptive = _C.SpeculationPolicyKind.fixed, _C.SpeculationPolicyKind.adaptive
    drift = (args.drift, args.drift_steps)
    print("| batch | acceptance | adaptive vs k=0 | fixed k=1 / 2 / 3 vs k=0 | adaptive / best "
          "| drafting steps per run | filled steps per run | retired | steps at k = 0/1/2/3 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for batch in args.batch:
        for p in args.acceptance:
            a = simulate(adaptive, K_MAX, batch, args.tokens, law, p, args.spread, args.noise, drift, args.runs,
                         args.seed)
            f = [simulate(fixed, k, batch, args.tokens, law, p, args.spread, args.noise, drift, args.runs,
                          args.seed)["vs_k0"] for k in range(1, K_MAX + 1)]
            print(f"| {batch} | {p} | {a['vs_k0']:.3f} | {' / '.join(f'{x:.3f}' for x in f)} | "
                  f"{a['vs_k0'] / max(f + [1.0]):.3f} | {a['drafting_steps_per_run']:.1f} | "
                  f"{a['filled_steps_per_run']:.1f} | {a['retired_share']:.2f} | "
                  f"{' / '.join(map(str, a['steps_by_k']))} |", flush=True)


if __name__ == "__main__":
    main()
