import json, glob, sys, statistics as st, collections
pool = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1] + '/*.json')):
    build = f.split('/')[-1].removesuffix('.json').split('_')[1]
    d = json.load(open(f))
    rows = {(r['batch'], r['policy']): r for r in d['results']}
    out = []
    for b in (1, 8, 32, 64):
        a, z = rows[(b, 'adaptive')], rows[(b, 'fixed')]
        pool[build][b].append(z['tpot_ms'] / a['tpot_ms'])
        out.append(f"b{b} {a['steps_by_k']} r{a['retired']} {z['tpot_ms'] / a['tpot_ms']:.3f}")
    print(f.split('/')[-1], ' | '.join(out))
for build in pool:
    print(build, ' '.join(f"b{b}: median {st.median(v):.3f} mean {st.mean(v):.3f}" for b, v in pool[build].items()))
