"""The grid's conditions for batch 64: a k = 0 engine and an adaptive one (k_max 3, the stash size given, 8 by
default) first serve greedy batches of 1, 8 and 32 as the offline grid does, then greedy batches of 64 in turns;
prints per turn each engine's target ms per step, its steps at each k and the sequences retired, then the median
adaptive / k0 ratio over the turns in which the adaptive engine ran k = 0 only (the same work as k = 0's).
  .venv/bin/python docs/cpu_engine_instances_1130_thirtyeighth/after_history.py [turns] [stash]"""
import statistics
import sys
sys.path.insert(0, 'scripts')  # run from the repository root
from bench_offline import run
from mtpserve import LLM

turns = int(sys.argv[1]) if len(sys.argv) > 1 else 8
stash = int(sys.argv[2]) if len(sys.argv) > 2 else 8
llms = {'k0': LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=0, max_cache_blocks=512),
        'adaptive': LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=3, speculative_policy='adaptive',
                        max_cache_blocks=512, deferred_fill_positions=stash)}
for batch in (1, 8, 32):
    for _ in range(3):
        for llm in llms.values():
            run(llm, batch, 128, 0.0)
same = []
for i in range(turns):
    got = {}
    for name in (('k0', 'adaptive') if i % 2 == 0 else ('adaptive', 'k0')):
        r = run(llms[name], 64, 128, 0.0)
        got[name] = r
        print(i, name, round(r['target_ms_per_step'], 2), r['steps_by_k'], 'retired', r['retired'], flush=True)
    if got['adaptive']['steps_by_k'][1:] == [0] * 3:
        same.append(got['adaptive']['target_ms_per_step'] / got['k0']['target_ms_per_step'])
print('turns at k = 0 only:', len(same), 'median adaptive / k0 target ms per step: %s' %
      (f'{statistics.median(same):.3f}' if same else '-'))
for llm in llms.values():
    llm.shutdown()
