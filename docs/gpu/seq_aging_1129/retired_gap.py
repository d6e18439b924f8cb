"""Where an MTP engine whose every sequence is retired loses time against k = 0: the serving sweep's temperature-1.5
cell at c = 8 offline, as continuous batching (192 held-out ShareGPT requests through 8 slots, 128 output tokens each,
ignore_eos), k = 0 against adaptive k_max = 3, alternating runs; then one run of each under torch.profiler (every
thread), the device's kernels and the host's CUDA calls per step.

  python3 docs/gpu/seq_aging_1129/retired_gap.py HELD_OUT.json
"""
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "scripts")
from bench_offline import ms_per_step  # noqa: E402
from gpu_timing import host_table, kernel_table  # noqa: E402
from mtpserve import LLM, SamplingParams  # noqa: E402
from mtpserve.bench.datasets import load_tokenizer, sample_sharegpt_requests  # noqa: E402

SLOTS, PROMPTS, OUTPUT = 8, 192, 128
requests = sample_sharegpt_requests(load_tokenizer(), PROMPTS, path=sys.argv[1], split="held-out",
                                    max_total_len=2000)
prompts = [r.prompt for r in requests]
params = SamplingParams(temperature=1.5, max_tokens=OUTPUT, ignore_eos=True)
engines = {name: LLM(devices="cuda:0", dtype="bfloat16", num_speculative_tokens=k, speculative_policy=policy,
                     max_seqs_per_batch=SLOTS)
           for name, k, policy in [("k=0", 0, "fixed"), ("adaptive", 3, "adaptive")]}
for llm in engines.values():
    llm.generate(prompts[:SLOTS], params)


def run(llm):
    before = llm.stats()
    llm.generate(prompts, params)
    after = llm.stats()
    ms = ms_per_step(before, after)
    ms["rest_seconds"] = ms["step_seconds"] - ms["sample_seconds"] - ms["draft_seconds"]
    ms["steps"] = after.steps - before.steps
    ms["prompt_steps"] = after.prompt_steps - before.prompt_steps
    ms["prompt_step_ms"] = (after.prompt_step_seconds - before.prompt_step_seconds) / max(ms["prompt_steps"], 1) * 1e3
    ms["retired"] = after.spec.retired - before.spec.retired
    ms["fill_skipped"] = after.fill_skipped_steps - before.fill_skipped_steps
    return ms


runs = {name: [] for name in engines}
for repeat in range(4):
    order = list(engines) if repeat % 2 == 0 else list(engines)[::-1]
    for name in order:
        runs[name].append(run(engines[name]))
print("| engine | step ms | target ms | sample ms (target inside) | draft ms | rest of step ms | steps | prompt steps "
      "| prompt step ms | retired | fill skipped |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, rs in runs.items():
    def med(key):
        return statistics.median(r[key] for r in rs)
    print(f"| {name} | {med('step_seconds'):.4f} | {med('target_seconds'):.4f} | {med('sample_seconds'):.4f} | "
          f"{med('draft_seconds'):.4f} | {med('rest_seconds'):.4f} | {med('steps'):.0f} | {med('prompt_steps'):.0f} | "
          f"{med('prompt_step_ms'):.3f} | {med('retired'):.0f} | {med('fill_skipped'):.0f} |")
    print("  step ms per run:", [round(r["step_seconds"], 4) for r in rs])

config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
for name, llm in engines.items():
    steps_before = llm.stats().steps
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], experimental_config=config) as prof:
        llm.generate(prompts, params)
        torch.cuda.synchronize()
    steps = llm.stats().steps - steps_before
    print(f"\n## {name}: one more run under torch.profiler, {steps} steps\n")
    print("\n".join(kernel_table(prof, 25, steps) + [""] + host_table(prof, 25, steps)))
for llm in engines.values():
    llm.shutdown()
