import sys
sys.path.insert(0, 'tests')
from test_speculation_policy import _C, ADAPTIVE, K_MAX, one_sequence_costing
verify = [5.2e-3, 6.1e-3, 7.4e-3, 6.0e-3]
draft = [1.5e-3, 1.7e-3, 3.3e-3, 4.6e-3]
policy = _C.SpeculationPolicy(ADAPTIVE, K_MAX)
one_sequence_costing(policy, verify, draft)
prev = 0
for steps in (0, 1, 2, 5, 10, 30, 60, 150):
    for step in range(prev, steps):
        policy.record_verify(1, 2, 3, 140 + step, verify[2])
        policy.record_draft(1, 3, 1, 1, draft[2])
    prev = steps
    print(steps, 'verify', ' '.join('%.2f' % (1e3 * policy.verify_seconds(1, k, 1 + k, 140 + steps)) for k in range(4)),
          'draft', ' '.join('%.2f' % (1e3 * policy.draft_seconds(1, 1 + k, max(k - 1, 0), max(k - 1, 0))) for k in range(4)))
