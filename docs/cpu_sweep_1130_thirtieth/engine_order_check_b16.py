import sys, statistics as st
sys.path.insert(0, '/work/main/scripts')
from bench_offline import run
from mtpserve import LLM
order = sys.argv[1].split(','); batch = int(sys.argv[2]); reps = int(sys.argv[3])
spec = {'k0': (0, 'fixed'), 'k0b': (0, 'fixed'), 'ad': (3, 'adaptive'), 'adb': (3, 'adaptive')}
llms = {n: LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=spec[n][0], speculative_policy=spec[n][1],
               max_cache_blocks=512) for n in order}
res = {}
for i in range(reps):
    names = order[i % len(order):] + order[:i % len(order)]
    for n in names:
        r = run(llms[n], batch, 128, 1.5)
        res.setdefault(n, []).append((r['target_ms_per_step'], r['step_ms_per_step']))
for n, v in res.items():
    t = [a for a, b in v]; s = [b for a, b in v]
    print(n, 'target median %.3f  step median %.3f  target all %s' % (st.median(t), st.median(s), ' '.join('%.2f' % x for x in t)))
for l in llms.values(): l.shutdown()
