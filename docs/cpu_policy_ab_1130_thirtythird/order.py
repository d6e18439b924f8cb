import json, glob, sys, statistics as st, collections
tp = collections.defaultdict(lambda: collections.defaultdict(list))
tps = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1] + '/*.json')):
    order = f.split('/')[-1].removesuffix('.json').split('_')[1]
    d = json.load(open(f))
    cells = {('a' if r['policy'] == 'adaptive' else r['k']): r for r in d['results']}
    a, z = cells['a'], cells[0]
    best = min((1, 2, 3), key=lambda k: cells[k]['tpot_ms'])
    print(f.split('/')[-1], a['steps_by_k'], 'retired', a['retired'], 'TPOT a/k0 %.3f' % (z['tpot_ms'] / a['tpot_ms']),
          'target a/k0 %.3f' % (a['target_ms_per_step'] / z['target_ms_per_step']))
    for m, r in cells.items():
        tp[order][m].append(r['tpot_ms'])
        tps[order][m].append(r['tokens_per_s'])
for order in tp:
    t = {m: st.median(v) for m, v in tp[order].items()}
    s = {m: st.median(v) for m, v in tps[order].items()}
    print(order, 'median over runs: adaptive TPOT speedup vs k0 %.3f, vs best fixed (k=%d) %.3f; tokens/s vs k0 %.3f' % (
        t[0] / t['a'], min((1, 2, 3), key=t.get), min(t[k] for k in (1, 2, 3)) / t['a'], s['a'] / s[0]))
