import json, glob, statistics as st, sys, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sorted(glob.glob(sys.argv[1] + '/*.json')):  # the runs dir of ab.sh
    v = path.split('/')[-1].split('_')[0]
    res = json.load(open(path))['results']
    for b in sorted({r['batch'] for r in res}):
        cells = {('a' if r['policy'] == 'adaptive' else r['k']): r for r in res if r['batch'] == b}
        best = max((cells[k]['tokens_per_s'], k) for k in (1, 2, 3))
        a = cells['a']
        rows[v][b].append((a['tokens_per_s'] / best[0], a['tokens_per_s'] / cells[0]['tokens_per_s'], best[1], a.get('steps_by_k')))
for v in rows:
    for b in sorted(rows[v]):
        rs = rows[v][b]
        print(v, b, 'adaptive/best fixed', ' '.join('%.3f' % r[0] for r in rs), 'mean %.3f' % st.mean(r[0] for r in rs),
              '| vs k0', ' '.join('%.2f' % r[1] for r in rs), '| best k', [r[2] for r in rs], '| steps_by_k', [r[3] for r in rs])
