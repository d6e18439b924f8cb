import os
import sys, random
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../tests'))
from test_speculation_policy import _C, ADAPTIVE, K_MAX
V = [0.420e-3, 0.519e-3, 0.531e-3, 0.535e-3]; D = [0.08e-3, 0.114e-3, 0.194e-3, 0.270e-3]
def step(m, k, ctx, s):
    m.record_verify(1, k, 1 + k, ctx, s * V[k]); m.record_draft(1, 1 + k, max(k - 1, 0), max(k - 1, 0), s * D[k])
def tot(m, k, ctx): return m.verify_seconds(1, k, 1 + k, ctx) + m.draft_seconds(1, 1 + k, max(k - 1, 0), max(k - 1, 0))
rng = random.Random(3); m = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
for i in range(16):
    step(m, i % 4, 100 + i, (1.5 if i < 4 else 1.0) * rng.lognormvariate(0, 0.01))
out = []
for i in range(300):
    k = 2 if i % 50 else [0, 1, 3][(i // 50) % 3]
    step(m, k, 120 + i, rng.lognormvariate(0, 0.01))
    if i in (0, 49, 149, 151, 299): out.append('%d: k3/k2 est %.3f true %.3f' % (i, tot(m, 3, 120 + i) / tot(m, 2, 120 + i), (V[3] + D[3]) / (V[2] + D[2])))
print(' | '.join(out))
