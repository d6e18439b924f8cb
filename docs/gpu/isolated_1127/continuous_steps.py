"""Where a step's time goes under continuous batching, fixed k = 3 against adaptive (k_max 3), one engine each,
repeats interleaved: ShareGPT held-out prompts with their reference completions' lengths through --slots sequences
at a time (as a server at that concurrency). Per decode or prompt step, from the engine's counters: wall ms, the
device ms of the target forward, of sampling and of drafting (CUDA events), the host remainder, tokens per step,
drafts per drafting sequence, chosen k.

  python3 docs/gpu/isolated_1127/continuous_steps.py DATASET --slots 4 --repeats 5
"""
import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_offline import mean_tpot_ms  # noqa: E402
from mtpserve import LLM, SamplingParams  # noqa: E402
from mtpserve.bench.datasets import load_tokenizer, sample_sharegpt_requests  # noqa: E402


def run(llm: LLM, prompts, params) -> dict:
    b = llm.stats()
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    wall = time.perf_counter() - start
    a = llm.stats()
    steps = a.steps - b.steps
    d = {n: (getattr(a, n) - getattr(b, n)) * 1e3 / steps for n in ("step_seconds", "target_seconds",
                                                                     "sample_seconds", "draft_seconds")}
    drafts = a.spec.drafts - b.spec.drafts
    by_k = [x - y for x, y in zip(a.spec.steps_by_k, list(b.spec.steps_by_k) + [0] * 8)]
    return {"tpot": mean_tpot_ms(outputs), "wall_s": wall, "steps": steps, "prompt_steps": a.prompt_steps - b.prompt_steps,
            "tokens_per_step": (a.generation_tokens - b.generation_tokens) / steps,
            "drafts_per_drafting_seq": (a.spec.draft_tokens - b.spec.draft_tokens) / max(drafts, 1),
            "by_k": "/".join(f"{100 * n / max(sum(by_k), 1):.0f}" for n in by_k), **d,
            "host": d["step_seconds"] - d["target_seconds"] - d["sample_seconds"] - d["draft_seconds"]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dataset")
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--prompts", type=int, default=48)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--devices", default="cuda:0")
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args()
    reqs = sample_sharegpt_requests(load_tokenizer(), args.prompts, path=args.dataset, max_total_len=2000,
                                    split="held-out")
    prompts = [r.prompt for r in reqs]
    params = [SamplingParams(temperature=0.0, max_tokens=r.expected_output_len, ignore_eos=True) for r in reqs]
    blocks = args.slots * (math.ceil(2000 / 128) + 2)
    methods = {"k=3": "fixed", "adaptive": "adaptive"}
    llms = {m: LLM(devices=args.devices, dtype=args.dtype, num_speculative_tokens=3, speculative_policy=policy,
                   max_seqs_per_batch=args.slots, block_size=128, max_cache_blocks=blocks) for m, policy in methods.items()}
    for llm in llms.values():
        llm.generate(prompts[:args.slots], SamplingParams(temperature=0.0, max_tokens=64, ignore_eos=True))
    rows = {m: [] for m in methods}
    for r in range(args.repeats):
        for m in (list(methods) if r % 2 == 0 else list(methods)[::-1]):
            rows[m].append(run(llms[m], prompts, params))
    print(f"slots {args.slots}, {len(prompts)} requests; per step: wall, device target / sample / draft, host remainder (ms)")
    for m, rs in rows.items():
        for x in rs:
            print(f"{m:9s} TPOT {x['tpot']:.3f} wall {x['wall_s']:.3f} s steps {x['steps']} (prompt {x['prompt_steps']}) "
                  f"tok/step {x['tokens_per_step']:.2f} drafts/seq {x['drafts_per_drafting_seq']:.2f} k {x['by_k']} | "
                  f"step {x['step_seconds']:.3f} target {x['target_seconds']:.3f} sample {x['sample_seconds']:.3f} "
                  f"draft {x['draft_seconds']:.3f} host {x['host']:.3f}")
        print(f"{m:9s} median TPOT {statistics.median(x['tpot'] for x in rs):.3f}")


if __name__ == "__main__":
    main()
