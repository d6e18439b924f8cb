"""Do engines doing the same work in one process take the same time per target forward? Six engines made in the
offline grid's order (k = 0, fixed k = 1, 2, 3, adaptive with k_max 3, then a second k = 0 engine), then
temperature-1.5 batches of 64 run on the first k = 0 engine, the adaptive one (every sequence retires on arrival:
k = 0's work exactly) and the last k = 0 engine, in a rotating order; prints each one's target ms per step and the
medians of their ratios to the first engine's.
  .venv/bin/python docs/cpu_engine_instances_1130_thirtyeighth/same_work.py [repeats] [batch]"""
import statistics
import sys
sys.path.insert(0, 'scripts')  # run from the repository root
from bench_offline import run
from mtpserve import LLM

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 6
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
made = [('k0 first', 0, 'fixed'), ('k1', 1, 'fixed'), ('k2', 2, 'fixed'), ('k3', 3, 'fixed'),
        ('adaptive', 3, 'adaptive'), ('k0 last', 0, 'fixed')]
llms = {name: LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=k, speculative_policy=policy,
                  max_cache_blocks=512) for name, k, policy in made}
timed = ['k0 first', 'adaptive', 'k0 last']
for name in timed:  # the policy's warm-up, and its sampling class's first record
    run(llms[name], batch, 128, 1.5)
target = {name: [] for name in timed}
for i in range(repeats):
    for name in timed[i % 3:] + timed[:i % 3]:
        r = run(llms[name], batch, 128, 1.5)
        target[name].append(r['target_ms_per_step'])
        assert name != 'adaptive' or r['steps_by_k'][1:] == [0] * 3, r['steps_by_k']
print({n: [round(t, 2) for t in v] for n, v in target.items()})
for name in timed[1:]:
    ratios = [a / b for a, b in zip(target[name], target['k0 first'])]
    print(f'median {name} / k0 first target ms per step: {statistics.median(ratios):.3f}')
for llm in llms.values():
    llm.shutdown()
