"""Does the adaptive engine's target forward cost more than k = 0's for the same work, or is it the order the
engines were made in? Engines made in the order given (k0: num_speculative_tokens 0; adaptive: k_max 3), then
temperature 1.5 batches of 32 (every adaptive sequence retires on arrival: k = 0's work exactly), alternating;
prints each engine's target ms per step and the median ratio adaptive / k0.
  .venv/bin/python docs/cpu_policy_ab_1130_thirtythird/engine_order.py adaptive k0 [repeats]"""
import statistics
import sys
sys.path.insert(0, 'scripts')  # run from the repository root
from bench_offline import run
from mtpserve import LLM

order = sys.argv[1:3]
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 8
kinds = {'k0': (0, 'fixed'), 'adaptive': (3, 'adaptive')}
llms = {name: LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=kinds[name][0],
                  speculative_policy=kinds[name][1], max_cache_blocks=512) for name in order}
for llm in llms.values():  # the policy's warm-up, and its sampling class's first record
    run(llm, 32, 128, 1.5)
target = {name: [] for name in order}
for i in range(repeats):
    for name in (order if i % 2 == 0 else order[::-1]):
        r = run(llms[name], 32, 128, 1.5)
        target[name].append(r['target_ms_per_step'])
        assert name == 'k0' or r['steps_by_k'][1:] == [0] * 3, r['steps_by_k']
ratios = [a / b for a, b in zip(target['adaptive'], target['k0'])]
print('made in order', ' then '.join(order), {n: [round(t, 2) for t in v] for n, v in target.items()})
print('median adaptive / k0 target ms per step: %.3f' % statistics.median(ratios))
for llm in llms.values():
    llm.shutdown()
