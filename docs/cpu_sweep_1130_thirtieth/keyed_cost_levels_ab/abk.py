import json, glob, statistics as st
for ver in ('old', 'new'):
    for b in (1, 8, 32):
        tps, ks, fx = [], [0, 0, 0, 0], {k: [] for k in range(4)}
        for f in glob.glob(f'runs_{ver}?.jsonl'):
            for l in open(f):
                if not l.startswith('{'): continue
                r = json.loads(l)
                if r['batch'] != b: continue
                if r['policy'] == 'adaptive':
                    tps.append(r['tokens_per_s']); ks = [a + c for a, c in zip(ks, r['steps_by_k'])]
                else:
                    fx[r['k']].append(r['tokens_per_s'])
        tot = sum(ks)
        best = max(st.median(fx[k]) for k in (1, 2, 3))
        print(ver, 'b%d' % b, 'adaptive median %.0f / best fixed median %.0f = %.3f' % (st.median(tps), best, st.median(tps) / best),
              'k0 %.0f' % st.median(fx[0]), 'steps at k 0/1/2/3 %%: %s' % '/'.join('%d' % (100 * x / tot) for x in ks),
              'fixed medians', ' '.join('%.0f' % st.median(fx[k]) for k in (1, 2, 3)))
