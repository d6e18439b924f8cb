import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + '/*.json')):
    d = json.load(open(f))
    rows = {}
    for r in d['results']:
        key = 'a' if r['policy'] == 'adaptive' else r['k']
        rows.setdefault((r['batch'], key), []).append(r)
    out = []
    for b in (1, 8, 32, 64):
        a = rows[(b, 'a')][0]
        out.append(f"b{b}:{a['steps_by_k']} tpot {a['tpot_ms']:.2f}/{rows[(b,0)][0]['tpot_ms']:.2f}/{rows[(b,1)][0]['tpot_ms']:.2f}")
    print(f.split('/')[-1], ' | '.join(out))
