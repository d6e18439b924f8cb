"""Replays one traced run's adaptive engine through the step cost model of the _C that is installed, and prints,
after each draft sample of its n-th adaptive run at `batch`, the model's verify + draft price of k = 1, 2, 3.
  python3 prices.py <log.gz> <batch> <n>   (run from the repository root, with .venv's python)"""
import os
import sys

sys.path.insert(0, 'tests')
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from segments import segments  # noqa: E402
from test_speculation_policy import _C, ADAPTIVE, K_MAX  # noqa: E402

path, batch, which = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
seen = 0
for run, samples in segments(path):
    if run['policy'] != 'adaptive':
        continue
    show = run['batch'] == batch and seen == which
    seen += run['batch'] == batch
    step, context = 0, 0
    for s in samples:
        if s[0] == 'V':
            policy.record_verify(*s[1:])
            context = s[4] + s[1]
            continue
        policy.record_draft(*s[1:])
        if show:
            step += 1
            n = s[1]
            prices = ' '.join(f'{k}:{1e3 * policy.verify_seconds(n, k, n * (1 + k), context):.3f}'
                              f'+{1e3 * policy.draft_seconds(n, n * (k + 1), max(k - 1, 0), n * max(k - 1, 0)):.3f}'
                              for k in range(1, 4))
            print(step, f'drafted k = {s[3] + 1}: {1e3 * s[5]:.3f} ms;', 'priced (verify + draft ms)', prices)
    if show:
        break
