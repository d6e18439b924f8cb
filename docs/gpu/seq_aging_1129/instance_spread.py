"""How much separate processes of one engine differ: the retired-gap load (192 held-out ShareGPT requests through 8
slots, 128 tokens each, temperature 1.5) on a k = 0 engine, 3 runs in this process; run the script several times and
compare the processes' medians.

  for i in 1 2 3 4 5; do python3 docs/gpu/seq_aging_1129/instance_spread.py HELD_OUT.json; done
"""
import os
import statistics
import sys

sys.path.insert(0, "scripts")
from bench_offline import ms_per_step  # noqa: E402
from mtpserve import LLM, SamplingParams  # noqa: E402
from mtpserve.bench.datasets import load_tokenizer, sample_sharegpt_requests  # noqa: E402

requests = sample_sharegpt_requests(load_tokenizer(), 192, path=sys.argv[1], split="held-out", max_total_len=2000)
prompts = [r.prompt for r in requests]
params = SamplingParams(temperature=1.5, max_tokens=128, ignore_eos=True)
llm = LLM(devices="cuda:0", dtype="bfloat16", num_speculative_tokens=0, max_seqs_per_batch=8)
llm.generate(prompts[:8], params)
runs = []
for _ in range(3):
    before = llm.stats()
    llm.generate(prompts, params)
    runs.append(ms_per_step(before, llm.stats()))
step = statistics.median(r["step_seconds"] for r in runs)
target = statistics.median(r["target_seconds"] for r in runs)
print(f"pid {os.getpid()} cpus {len(os.sched_getaffinity(0))}: step ms {step:.4f} target ms {target:.4f} "
      f"(runs {[round(r['step_seconds'], 4) for r in runs]})")
llm.shutdown()
