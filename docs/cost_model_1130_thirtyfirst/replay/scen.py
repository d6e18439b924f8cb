import os
import sys
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(HERE, '../../../tests'))
from models import ScalingCost, DriftCost
from replay import cpp
verify = [5.2e-3, 6.1e-3, 7.4e-3, 6.0e-3]; draft = [1.5e-3, 1.7e-3, 3.3e-3, 4.6e-3]
import random
for name, make in (('cpp', cpp), ('scaling', ScalingCost)):
    m = make()
    for step in range(16):  # warm-up
        k = step % 4; m.record_verify(1, k, 1 + k, 100 + step, verify[k]); m.record_draft(1, 1 + k, max(k - 1, 0), max(k - 1, 0), draft[k])
    for step in range(40):
        for k in range(4):
            m.record_verify(1, k, 1 + k, 100 + step, verify[k]); m.record_draft(1, 1 + k, max(k - 1, 0), max(k - 1, 0), draft[k])
    for step in range(30):
        m.record_verify(1, 2, 3, 140 + step, verify[2]); m.record_draft(1, 3, 1, 1, draft[2])
    print(name, 'mix', ' '.join('%.2f+%.2f' % (1e3 * m.verify_seconds(1, k, 1 + k, 170), 1e3 * m.draft_seconds(1, 1 + k, max(k - 1, 0), max(k - 1, 0))) for k in range(4)))
    for step in range(30):  # the machine slows by 20%, only k=2 runs
        m.record_verify(1, 2, 3, 170 + step, 1.2 * verify[2]); m.record_draft(1, 3, 1, 1, 1.2 * draft[2])
    print(name, 'slow', ' '.join('%.2f+%.2f' % (1e3 * m.verify_seconds(1, k, 1 + k, 200), 1e3 * m.draft_seconds(1, 1 + k, max(k - 1, 0), max(k - 1, 0))) for k in range(4)))
    # noisy: 15% noise, k=2 dominant, probes of others every 50
    random.seed(1); m = make()
    for step in range(16):
        k = step % 4; m.record_verify(1, k, 1 + k, 100, verify[k] * random.lognormvariate(0, .15)); m.record_draft(1, 1 + k, max(k - 1, 0), max(k - 1, 0), draft[k] * random.lognormvariate(0, .15))
    errs = []
    for step in range(2000):
        k = 2 if step % 50 else (step // 50) % 4
        m.record_verify(1, k, 1 + k, 100 + step % 300, verify[k] * random.lognormvariate(0, .15)); m.record_draft(1, 1 + k, max(k - 1, 0), max(k - 1, 0), draft[k] * random.lognormvariate(0, .15))
        if step > 200: errs.append(abs((m.verify_seconds(1, 3, 4, 100 + step % 300) + m.draft_seconds(1, 4, 2, 2)) / (m.verify_seconds(1, 2, 3, 100 + step % 300) + m.draft_seconds(1, 3, 1, 1)) / ((verify[3] + draft[3]) / (verify[2] + draft[2])) - 1))
    errs.sort(); print(name, 'noisy 3/2 ratio err median %.3f p90 %.3f' % (errs[len(errs) // 2], errs[int(len(errs) * .9)]))
