import os
import sys
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(HERE, '../../../tests'))
from parse import parse
from replay import cpp, truths
runs = parse(sys.argv[1]); target_rep = int(sys.argv[2]); batch = int(sys.argv[3]) if len(sys.argv) > 3 else 1
m = cpp()
for r in runs:
    if r['policy'] != 'adaptive': continue
    show = r['rep'] == target_rep and r['batch'] == batch
    if show: print('truth', {k: tuple(round(x * 1e3, 2) for x in v[:2]) for k, v in truths(runs, batch, target_rep).items()})
    i = 0
    for s in r['warm'] + r['samples']:
        if s[0] == 'D': m.record_draft(*s[1:]); continue
        m.record_verify(*s[1:]); i += 1
        if show and i % 3 == 1:
            n, ctx = s[1], s[4]
            print(i, 'k', s[2], 'meas %.2f' % (s[5] * 1e3), ' '.join('%d:%.2f+%.2f' % (k, 1e3 * m.verify_seconds(n, k, n * (1 + k), ctx), 1e3 * m.draft_seconds(n, n * 2, max(k - 1, 0), n * max(k - 1, 0))) for k in range(4)))
