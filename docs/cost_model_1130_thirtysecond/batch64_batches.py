"""One adaptive engine on this CPU, batch after batch of 64 greedy requests of 128 tokens (bench_offline.run, which
warms up with one short request first): each batch's target / step / sampling ms a step, steps, steps by k, steps that
skipped the MTP fill, sequences retired.
  .venv/bin/python docs/cost_model_1130_thirtysecond/batch64_batches.py 3 adaptive 16"""
import sys
sys.path.insert(0, 'scripts')  # run from the repository root
from bench_offline import run
from mtpserve import LLM
k, policy = int(sys.argv[1]), sys.argv[2]
llm = LLM(None, devices='cpu', dtype='float32', num_speculative_tokens=k, speculative_policy=policy, max_cache_blocks=512)
for i in range(int(sys.argv[3]) if len(sys.argv) > 3 else 8):
    r = run(llm, 64, 128, 0.0)
    print(i, 'target %.2f step %.2f sample %.2f' % (r['target_ms_per_step'], r['step_ms_per_step'], r['sample_ms_per_step']), r['steps'], r.get('steps_by_k'), r.get('fill_skipped_steps'), r.get('retired'))
llm.shutdown()
