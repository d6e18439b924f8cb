import sys, statistics as st
sys.path.insert(0, '/work/main/scripts')
from bench_offline import run
from mtpserve import LLM
order = sys.argv[1].split(',')
spec = {'k0': (0, 'fixed'), 'k0b': (0, 'fixed'), 'ad': (3, 'adaptive'), 'adb': (3, 'adaptive')}
llms = {n: LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=spec[n][0], speculative_policy=spec[n][1],
               max_cache_blocks=512) for n in order}
res = {}
for batch in (2, 4):
    for i in range(6):
        names = order[i % len(order):] + order[:i % len(order)]
        for n in names:
            r = run(llms[n], batch, 128, 1.5)
            res.setdefault((n, batch), []).append(r['target_ms_per_step'])
for (n, b), v in sorted(res.items(), key=lambda x: (x[0][1], x[0][0])):
    print(b, n, 'target ms/step median %.3f  all %s' % (st.median(v), ' '.join('%.2f' % x for x in v)))
for l in llms.values(): l.shutdown()
