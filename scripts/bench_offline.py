"""Offline decode throughput of mtpserve.LLM on this machine: batch sizes x MTP k, side by side.

Every request gets the same number of output tokens (ignore_eos) from ShareGPT-like chat prompts;
tokens/s counts output tokens over the wall time of the generate call (prefill included, as a
user sees it), after one warm-up call.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from mtpserve import LLM, SamplingParams

PROMPTS = [
    "What is the capital of France?", "Write a short poem about the sea.", "Explain how a transformer works.",
    "Give me three tips for learning Python.", "What is the difference between a list and a tuple?",
    "Summarize the plot of Romeo and Juliet.", "How do I bake bread at home?", "Why is the sky blue?",
]


def run(llm: LLM, batch: int, max_tokens: int) -> dict:
    messages = [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(batch)]
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    llm.chat(messages[:1], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))  # warm-up
    before = llm.stats()
    start = time.perf_counter()
    outputs = llm.chat(messages, params)
    elapsed = time.perf_counter() - start
    after = llm.stats()
    drafts = after.spec.drafts - before.spec.drafts
    draft_tokens = after.spec.draft_tokens - before.spec.draft_tokens
    accepted = after.spec.accepted_tokens - before.spec.accepted_tokens
    steps = after.steps - before.steps
    generated = sum(len(o.outputs[0].token_ids) for o in outputs)
    per_step = {name: (getattr(after, name) - getattr(before, name)) / steps * 1e3
                for name in ("target_seconds", "sample_seconds", "draft_seconds")}
    return {"batch": batch, "tokens_per_s": generated / elapsed, "seconds": elapsed, "steps": steps,
            "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
            "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
            "target_ms_per_step": per_step["target_seconds"], "sample_ms_per_step": per_step["sample_seconds"],
            "draft_ms_per_step": per_step["draft_seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--ks", type=int, nargs="+", default=[0])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--batch-invariant", choices=("off", "on", "both"), default="off",
                        help="engine --batch_invariant; both: each k with the mode off and on, side by side")
    parser.add_argument("--graphs", choices=("off", "on", "both"), default="on",
                        help="engine --enable_graph (GPUs only); both: each k with graphs off and on")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--plot", default=None, help="write a tokens/s bar chart (PNG) here")
    args = parser.parse_args()
    results = []
    choices = {"off": [False], "on": [True], "both": [False, True]}
    modes, graph_modes = choices[args.batch_invariant], choices[args.graphs]
    for k in args.ks:
        for invariant in modes:
            for graphs in graph_modes:
                llm = LLM(args.model, devices=args.devices, dtype=args.dtype, num_speculative_tokens=k,
                          max_cache_blocks=512, batch_invariant=invariant, enable_graph=graphs)
                for batch in args.batch_sizes:
                    r = {"k": k, "batch_invariant": invariant, "graphs": graphs,
                         "graphs_captured": llm.core.engine.num_graphs(), **run(llm, batch, args.max_tokens)}
                    results.append(r)
                    print(json.dumps(r), flush=True)
                llm.shutdown()
    device = llm.core.args.device
    info = {"device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
            "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "dtype": args.dtype, "max_tokens": args.max_tokens}
    for invariant in modes:
        for graphs in graph_modes:
            if len(modes) > 1 or len(graph_modes) > 1:
                print(f"\nbatch_invariant={invariant} graphs={graphs}")
            print(markdown_table([r for r in results if (r["batch_invariant"], r["graphs"]) == (invariant, graphs)]))
    if len(modes) > 1:
        print("\n" + side_by_side(results, "batch_invariant", "batch-invariant"))
    if len(graph_modes) > 1:
        print("\n" + side_by_side(results, "graphs", "CUDA graphs"))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": info, "results": results}, f, indent=1)
    if args.plot:
        plot(results, args.plot, info["device"])


def markdown_table(results: list[dict]) -> str:
    """Tokens/s with the speedup over k = 0 at the same batch size, the step costs the engine measured
    (device time of the target step and of drafting, CUDA events on a GPU), and MTP's ideal speedup
    from them: mean acceptance length x t(k = 0 step) / (t(verify step) + t(drafting))."""
    base = {r["batch"]: r for r in results if r["k"] == 0}
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines = ["| k | batch | tokens/s | speedup vs k=0 | acceptance rate | mean acceptance length | "
             "target ms/step | draft ms/step | ideal speedup | speedup / ideal |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b = base.get(r["batch"])
        speedup = r["tokens_per_s"] / b["tokens_per_s"] if b else None
        ideal = None
        if b and r["mean_acceptance_length"]:
            ideal = r["mean_acceptance_length"] * b["target_ms_per_step"] / (
                r["target_ms_per_step"] + r["draft_ms_per_step"])
        lines.append(f"| {r['k']} | {r['batch']} | {r['tokens_per_s']:.0f} | {fmt(speedup, '.2f')} | "
                     f"{fmt(r['acceptance_rate'], '.3f')} | {fmt(r['mean_acceptance_length'], '.2f')} | "
                     f"{r['target_ms_per_step']:.3f} | {r['draft_ms_per_step']:.3f} | {fmt(ideal, '.2f')} | "
                     f"{fmt(speedup / ideal if ideal else None, '.2f')} |")
    return "\n".join(lines)


def side_by_side(results: list[dict], flag: str, name: str) -> str:
    """Tokens/s with an engine flag off and on, measured in one run."""
    by = {(r["k"], r["batch"], r[flag]): r["tokens_per_s"] for r in results}
    lines = [f"| k | batch | tokens/s, off | tokens/s, {name} | on / off |", "|---|---|---|---|---|"]
    for k, batch in sorted({(r["k"], r["batch"]) for r in results}):
        off, on = by[k, batch, False], by[k, batch, True]
        lines.append(f"| {k} | {batch} | {off:.0f} | {on:.0f} | {on / off:.2f} |")
    return "\n".join(lines)


def plot(results: list[dict], path: str, device: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = sorted({r["k"] for r in results})
    batches = sorted({r["batch"] for r in results})
    width = 0.8 / len(ks)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, k in enumerate(ks):
        values = [next((r["tokens_per_s"] for r in results if r["k"] == k and r["batch"] == b), 0) for b in batches]
        ax.bar([j + i * width for j in range(len(batches))], values, width, label="no MTP" if k == 0 else f"MTP k={k}")
    ax.set_xticks([j + width * (len(ks) - 1) / 2 for j in range(len(batches))], [f"batch {b}" for b in batches])
    ax.set_ylabel("output tokens/s")
    ax.set_title(f"mtpserve offline decode, embedded model, {device}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
