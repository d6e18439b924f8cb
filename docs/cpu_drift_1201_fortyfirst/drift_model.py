"""One request (batch 1) drafting k = 3 for long where every step fills, probes at k = 0 every `every` steps: how
far the price of a step without drafts moves between two measurements of it (the policy alone, made-up timings).
    .venv/bin/python docs/cpu_drift_1201_fortyfirst/drift_model.py"""
import math, random
from mtpserve import _C

def true_verify(k, ctx):  # the tiny model on this CPU: 0.7 ms without drafts, 1.55 ms at k = 3
    return [0.70e-3, 0.95e-3, 1.25e-3, 1.55e-3][k] + 1e-8 * ctx

def run(seed, noise, every):
    rng = random.Random(seed)
    p = _C.SpeculationPolicy(_C.SpeculationPolicyKind.adaptive, 3)
    ctx = 40
    for rnd in range(4):
        for k in range(4):
            ctx += 1 + k
            p.record_verify(1, k, 1 + k, ctx, true_verify(k, ctx) * (1 + noise * rng.gauss(0, 1)))
    moves, after = [], None
    for step in range(1600):
        k = 0 if step % every == every - 1 else 3
        ctx += 1 + k
        if after is not None:
            moves.append(abs(math.log(p.verify_seconds(1, 0, 1, ctx) / after)))
        p.record_verify(1, k, 1 + k, ctx, true_verify(k, ctx) * (1 + noise * rng.gauss(0, 1)))
        if k == 0:
            after = p.verify_seconds(1, 0, 1, ctx)
    return moves

for every in (50, 200):
    for noise in (0.05, 0.2):
        m = [x for seed in range(5) for x in run(seed, noise, every)]
        print(f"probe every {every}, noise {noise}: since the last k = 0 sample the estimate moved by mean "
              f"{sum(m)/len(m):.3f}, 95th pct {sorted(m)[int(0.95*len(m))]:.3f}, max {max(m):.3f} (log ratio)")
