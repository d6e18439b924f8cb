import os
import sys, statistics as st, collections
HERE = os.path.dirname(os.path.abspath(__file__)); sys.path.insert(0, HERE); sys.path.insert(0, os.path.join(HERE, '../../../tests'))
from parse import parse
from models import MixedCost
import mtpserve._C as _C
from test_speculation_policy import ADAPTIVE, K_MAX

def cpp(): return _C.SpeculationPolicy(ADAPTIVE, K_MAX)
def truths(runs, batch, rep):
    t = {}
    for r in runs:
        if r['batch'] == batch and r['rep'] == rep and r['policy'] == 'fixed':
            V = [s[5] for s in r['samples'] if s[0] == 'V' and s[2] == r['k']]
            D = [s for s in r['samples'] if s[0] == 'D' and s[3] == r['k'] - 1]
            fill = st.median(s[2] for s in D)
            t[r['k']] = (st.median(V), st.median(s[5] for s in D), fill)
    return t

def evaluate(make, runs, batch, skip=10):
    errs = collections.defaultdict(list)
    m = make()
    for r in runs:
        if r['policy'] != 'adaptive': continue
        if r['batch'] != batch:
            for s in r['warm'] + r['samples']: getattr(m, 'record_verify' if s[0] == 'V' else 'record_draft')(*s[1:])
            continue
        t = truths(runs, batch, r['rep'])
        for s in r['warm']: getattr(m, 'record_verify' if s[0] == 'V' else 'record_draft')(*s[1:])
        nV = 0
        for s in r['samples']:
            if s[0] == 'D': m.record_draft(*s[1:]); continue
            m.record_verify(*s[1:]); nV += 1
            if nV < skip: continue
            n, ctx = s[1], s[4]
            tot = {k: m.verify_seconds(n, k, n * (1 + k), ctx) + m.draft_seconds(n, t[k][2], k - 1, n * (k - 1)) for k in t}
            if min(tot.values()) <= 0: continue
            true = {k: t[k][0] + t[k][1] for k in t}
            for a, b in ((3, 2), (3, 1), (2, 1)):
                errs[f'{a}/{b}'].append(tot[a] / tot[b] / (true[a] / true[b]) - 1)
            for k in t: errs[f'abs{k}'].append(tot[k] / true[k] - 1)
    return {k: (round(st.median(v), 3), round(st.median(abs(x) for x in v), 3)) for k, v in sorted(errs.items())}

if __name__ == '__main__':
    runs = []
    for p in sys.argv[2:]: runs += parse(p)
    batch = int(sys.argv[1])
    print('cpp', evaluate(cpp, runs, batch))
    for lam in (0.0, 1.0, 4.0, 16.0, 1e9):
        print('mixed', lam, evaluate(lambda: MixedCost(lam), runs, batch))
        print('mixed free', lam, evaluate(lambda: MixedCost(lam, True), runs, batch))
