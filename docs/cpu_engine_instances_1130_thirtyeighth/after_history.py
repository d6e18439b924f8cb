"""The grid's conditions for batch 64: a k = 0 engine and an adaptive one (k_max 3, the stash size given, 8 by
default) first serve greedy batches of 1, 8 and 32 as the offline grid does, then greedy batches of 64 in turns;
prints per turn each engine's target ms per step, its mean TPOT, its steps at each k and the sequences retired, then
the median adaptive / k0 ratios of both over the turns in which the adaptive engine's decode steps ran k = 0 only.
With a temperature (default 0: greedy) the batches of 64 are sampled at it (1.5: every sequence retires on arrival).
  .venv/bin/python docs/cpu_engine_instances_1130_thirtyeighth/after_history.py [turns] [stash] [prefix cache: on|off]
    [temperature]"""
import statistics
import sys
sys.path.insert(0, 'scripts')  # run from the repository root
from bench_offline import run
from mtpserve import LLM

turns = int(sys.argv[1]) if len(sys.argv) > 1 else 8
stash = int(sys.argv[2]) if len(sys.argv) > 2 else 8
prefix = (sys.argv[3] if len(sys.argv) > 3 else 'on') == 'on'
temperature = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
llms = {'k0': LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=0, max_cache_blocks=512,
                  enable_prefix_cache=prefix),
        'adaptive': LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=3, speculative_policy='adaptive',
                        max_cache_blocks=512, deferred_fill_positions=stash, enable_prefix_cache=prefix)}
for batch in (1, 8, 32):
    for _ in range(3):
        for llm in llms.values():
            run(llm, batch, 128, 0.0)
same = []
for i in range(turns):
    got = {}
    for name in (('k0', 'adaptive') if i % 2 == 0 else ('adaptive', 'k0')):
        r = run(llms[name], 64, 128, temperature)
        got[name] = r
        print(i, name, round(r['target_ms_per_step'], 2), 'tpot', round(r['tpot_ms'], 2), r['steps_by_k'], 'retired',
              r['retired'], flush=True)
    if got['adaptive']['steps_by_k'][1:] == [0] * 3:
        same.append([got['adaptive'][key] / got['k0'][key] for key in ('target_ms_per_step', 'tpot_ms')])
if same:
    print('turns at k = 0 only:', len(same), 'median adaptive / k0: target ms per step %.3f, TPOT %.3f' %
          tuple(statistics.median(x[j] for x in same) for j in range(2)))
for llm in llms.values():
    llm.shutdown()
