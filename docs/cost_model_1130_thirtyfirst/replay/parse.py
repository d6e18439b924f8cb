import os
import sys, collections, statistics as st
def parse(path):
    """-> list of runs: dict(k, policy, batch, rep, samples=[('V',n,k,rows,ctx,s)|('D',n,fill,rec,recrows,s)])"""
    runs, pending = [], []
    cur = None
    for line in open(path):
        p = line.split()
        if not p: continue
        if p[0] == 'M':
            cur = dict(k=int(p[1]), policy=p[2], batch=int(p[3]), rep=int(p[4]), warm=pending, samples=[])
            pending = []
            runs.append(cur)
        elif p[0] == 'E':
            cur = None
        elif p[0] in 'VD':
            rec = (p[0], *map(int, p[1:5]), float(p[5]))
            (cur['samples'] if cur else pending).append(rec)
    return runs
if __name__ == '__main__':
    runs = parse(sys.argv[1])
    for b in sorted({r['batch'] for r in runs}):
        for r in runs:
            if r['batch'] != b: continue
            V = collections.defaultdict(list); D = collections.defaultdict(list)
            for s in r['samples']:
                if s[0] == 'V': V[s[2]].append(s[5]*1e3)
                else: D[s[3]].append(s[5]*1e3)
            print(b, r['rep'], r['policy'], r['k'], 'V', {k: (len(v), round(st.median(v),2)) for k, v in sorted(V.items())},
                  'D', {k: (len(v), round(st.median(v),2)) for k, v in sorted(D.items())})
