"""Offline decode throughput of mtpserve.LLM on this machine: batch sizes x MTP methods, side by side.

Methods: k = 0, fixed k (--ks) and the adaptive policy with k_max = --adaptive-k-max (0: none). Every request gets
the same number of output tokens (ignore_eos) from ShareGPT-like chat prompts; tokens/s counts output tokens over
the wall time of the generate call (prefill included, as a user sees it), after one warm-up call. Before a batch
size's repeats each method runs that batch once, untimed: an engine's first steps at a batch size are its adaptive
policy's warm-up there (each k in turn for that batch-size bucket) and the learning of what drafting pays at that
load, which an engine does once in its life, not each batch (on a CPU at batch 64 adaptive's first repeat read 0.92
of k = 0's tokens/s and its later ones 0.98). With --repeats N each cell is the median of N generate calls (the
methods interleaved per repeat, so a co-tenant's load hits them alike, in an order that puts each method after each
other one equally often: mtpserve.bench.run_order); `paired speedup` is the median of the repeats' own ratios to
k = 0. `TPOT` is the mean time per output token after each request's first (the median repeat's), which the prefill
and the batch's slowest sequence do not weigh on. `chosen k` is the share of decode steps at each k; `fill skipped`
the share of steps that ran no MTP forward (adaptive: every sequence deferred its fill). Each run's JSON line, and
--out for every repeat, carry the share of the machine's CPU time the hypervisor stole during it (`stolen_share`):
another guest's load, which on this project's development VM slows the engine's steps.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from mtpserve import LLM, SamplingParams
from mtpserve.bench.cpu_placement import machine_times, stolen_share
from mtpserve.bench.run_order import balanced_order
from mtpserve.engine_args import EngineArgs

PROMPTS = [
    "What is the capital of France?", "Write a short poem about the sea.", "Explain how a transformer works.",
    "Give me three tips for learning Python.", "What is the difference between a list and a tuple?",
    "Summarize the plot of Romeo and Juliet.", "How do I bake bread at home?", "Why is the sky blue?",
]


def timed_chat(llm: LLM, prompts: list[str], batch: int, params: SamplingParams):
    """One chat call over `batch` of the prompts (cycled): (outputs, wall seconds, engine stats before, after,
    output tokens)."""
    messages = [[{"role": "user", "content": prompts[i % len(prompts)]}] for i in range(batch)]
    before = llm.stats()
    start = time.perf_counter()
    outputs = llm.chat(messages, params)
    elapsed = time.perf_counter() - start
    return outputs, elapsed, before, llm.stats(), sum(len(o.outputs[0].token_ids) for o in outputs)


def counters(before, after) -> dict:
    """The engine's step and speculation counters between two `stats()` snapshots."""
    spec = {name: getattr(after.spec, name) - getattr(before.spec, name)
            for name in ("drafts", "draft_tokens", "accepted_tokens", "retired")}
    return {"steps": after.steps - before.steps,
            "steps_by_k": [a - b for a, b in zip(after.spec.steps_by_k, list(before.spec.steps_by_k) + [0] * 8)],
            **{name: getattr(after, name) - getattr(before, name)
               for name in ("fill_skipped_steps", "caught_up_positions", "dropped_positions")},
            **spec}


def ms_per_step(before, after) -> dict:
    """Milliseconds per step of the whole step, the target forward, the sampling, the drafting, the drafting's host
    work before its launch and the policy's plan, between two `stats()` snapshots."""
    steps = after.steps - before.steps
    return {name: (getattr(after, name) - getattr(before, name)) / steps * 1e3
            for name in ("step_seconds", "target_seconds", "sample_seconds", "draft_seconds", "draft_host_seconds",
                         "plan_seconds")}


def mean_tpot_ms(outputs) -> float:
    """Time per output token after the first, averaged over the requests (as serving benchmarks report it): unlike
    tokens/s of the whole call, neither the prefill nor the batch's slowest sequence weighs in."""
    tpots = [(o.metrics.finished_time - o.metrics.first_token_time) / (len(o.outputs[0].token_ids) - 1)
             for o in outputs if len(o.outputs[0].token_ids) > 1]
    return statistics.mean(tpots) * 1e3


def run(llm: LLM, batch: int, max_tokens: int, temperature: float) -> dict:
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, ignore_eos=True)
    timed_chat(llm, PROMPTS, 1, SamplingParams(temperature=temperature, max_tokens=8, ignore_eos=True))  # warm-up
    machine_before = machine_times()
    outputs, elapsed, before, after, generated = timed_chat(llm, PROMPTS, batch, params)
    stolen = stolen_share(machine_before, machine_times())
    c = counters(before, after)
    drafts, draft_tokens, accepted = c.pop("drafts"), c.pop("draft_tokens"), c.pop("accepted_tokens")
    per_step = ms_per_step(before, after)
    return {"batch": batch, "tokens_per_s": generated / elapsed, "seconds": elapsed, "tpot_ms": mean_tpot_ms(outputs),
            **c,
            "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
            "mean_acceptance_length": 1 + accepted / drafts if drafts else None,
            "target_ms_per_step": per_step["target_seconds"], "sample_ms_per_step": per_step["sample_seconds"],
            "draft_ms_per_step": per_step["draft_seconds"], "draft_host_ms_per_step": per_step["draft_host_seconds"],
            "step_ms_per_step": per_step["step_seconds"], "stolen_share": stolen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None)
    parser.add_argument("--devices", default="auto")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--ks", type=int, nargs="+", default=[0], help="k = 0 and fixed-policy k's")
    parser.add_argument("--adaptive-k-max", type=int, nargs="*", default=[],
                        help="also the adaptive policy with each of these k_max")
    parser.add_argument("--deferred-fill-positions", type=int, nargs="+", default=None,
                        help="the adaptive methods' engine --deferred_fill_positions (default: the engine's for "
                             "--devices); several: each side by side (0: the MTP fill runs every step)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--batch-invariant", choices=("off", "on", "both"), default="off",
                        help="engine --batch_invariant; both: each k with the mode off and on, side by side")
    parser.add_argument("--graphs", choices=("off", "on", "both"), default="on",
                        help="engine --enable_graph (GPUs only); both: each k with graphs off and on")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--plot", default=None, help="write a tokens/s bar chart (PNG) here")
    args = parser.parse_args()
    choices = {"off": [False], "on": [True], "both": [False, True]}
    modes, graph_modes = choices[args.batch_invariant], choices[args.graphs]
    deferred = args.deferred_fill_positions or [EngineArgs(devices=args.devices).deferred_fill_positions]
    methods = [(k, "fixed", invariant, graphs, deferred[0]) for k in args.ks for invariant in modes
               for graphs in graph_modes]
    methods += [(k, "adaptive", invariant, graphs, d) for k in args.adaptive_k_max for d in deferred
                for invariant in modes for graphs in graph_modes]
    llms = {m: LLM(args.model, devices=args.devices, dtype=args.dtype, num_speculative_tokens=m[0],
                   speculative_policy=m[1], max_cache_blocks=512, batch_invariant=m[2], enable_graph=m[3],
                   deferred_fill_positions=m[4])
            for m in methods}
    runs = {}
    methods_in_order = list(llms.items())
    for batch in args.batch_sizes:
        for _, llm in methods_in_order:
            run(llm, batch, args.max_tokens, args.temperature)
        for i in range(args.repeats):
            # On a GPU at its power cap the run after the heaviest method (fixed k = 3) can start at a lower
            # clock: no method should be the one that always follows it.
            for (k, policy, invariant, graphs, d), llm in balanced_order(methods_in_order, i):
                r = run(llm, batch, args.max_tokens, args.temperature)
                runs.setdefault((k, policy, invariant, graphs, d, batch), []).append(r)
                print(json.dumps({"k": k, "policy": policy, "graphs": graphs, "deferred_fill_positions": d, **r}),
                      flush=True)
    results = [{"k": k, "policy": policy, "batch_invariant": invariant, "graphs": graphs,
                "deferred_fill_positions": d, **median_run(rs)}
               for (k, policy, invariant, graphs, d, batch), rs in runs.items()]
    results.sort(key=lambda r: (r["policy"] == "adaptive", r["k"], -r["deferred_fill_positions"], r["batch"]))
    device = args.devices if args.devices != "auto" else next(iter(llms.values())).core.args.device
    for llm in llms.values():
        llm.shutdown()
    info = {"device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
            "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "dtype": args.dtype, "max_tokens": args.max_tokens,
            "temperature": args.temperature, "repeats": args.repeats,
            "deferred_fill_positions": deferred}
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


def median_run(runs: list[dict]) -> dict:
    """The run with the median tokens/s (its own step counts and costs kept with it)."""
    ordered = sorted(runs, key=lambda r: r["tokens_per_s"])
    return {**ordered[len(ordered) // 2], "tokens_per_s_all": [r["tokens_per_s"] for r in runs],
            "stolen_share_all": [r["stolen_share"] for r in runs]}


def paired_speedup(r: dict, base: dict) -> float:
    """The median over repeats of tokens/s against k = 0's in the same repeat: the methods run interleaved, so a
    repeat's ratio cancels what the machine did during it (its spread is the noise of one comparison)."""
    return statistics.median(a / b for a, b in zip(r["tokens_per_s_all"], base["tokens_per_s_all"]))


def method_name(r: dict) -> str:
    if r["k"] == 0:
        return "k=0"
    if r.get("policy") != "adaptive":
        return f"fixed k={r['k']}"
    return f"adaptive k_max={r['k']}" + (", fill every step" if r.get("deferred_fill_positions") == 0 else "")


def chosen_k(r: dict) -> str:
    total = sum(r.get("steps_by_k") or [])
    return "-" if not total else " / ".join(f"{100 * n / total:.0f}" for n in r["steps_by_k"])


def fill_skipped(r: dict) -> str:
    return "-" if r["k"] == 0 or not r.get("steps") else f"{100 * r.get('fill_skipped_steps', 0) / r['steps']:.0f}"


def markdown_table(results: list[dict]) -> str:
    """Tokens/s with the speedup over k = 0 at the same batch size, the mean TPOT and its speedup, the step costs
    the engine measured (device time of the target step and of drafting, CUDA events on a GPU), and MTP's ideal
    speedup from them: mean acceptance length x t(k = 0 step) / (t(verify step) + t(drafting)), against which
    both speedups are set."""
    base = {r["batch"]: r for r in results if r["k"] == 0}
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines = ["| method | batch | tokens/s | speedup vs k=0 | paired speedup | TPOT ms | TPOT speedup | "
             "acceptance rate | mean acceptance length | target ms/step | draft ms/step | ideal speedup | "
             "speedup / ideal | TPOT speedup / ideal | chosen k = 0/1/2/3 (% of steps) | fill skipped (% of steps) | "
             "sequences retired from drafting |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b = base.get(r["batch"])
        speedup = r["tokens_per_s"] / b["tokens_per_s"] if b else None
        paired = paired_speedup(r, b) if b else None
        tpot_speedup = b["tpot_ms"] / r["tpot_ms"] if b else None
        ideal = None
        if b and r["mean_acceptance_length"]:
            ideal = r["mean_acceptance_length"] * b["target_ms_per_step"] / (
                r["target_ms_per_step"] + r["draft_ms_per_step"])
        lines.append(f"| {method_name(r)} | {r['batch']} | {r['tokens_per_s']:.0f} | {fmt(speedup, '.2f')} | "
                     f"{fmt(paired, '.2f')} | {r['tpot_ms']:.3f} | {fmt(tpot_speedup, '.2f')} | "
                     f"{fmt(r['acceptance_rate'], '.3f')} | {fmt(r['mean_acceptance_length'], '.2f')} | "
                     f"{r['target_ms_per_step']:.3f} | {r['draft_ms_per_step']:.3f} | {fmt(ideal, '.2f')} | "
                     f"{fmt(speedup / ideal if ideal else None, '.2f')} | "
                     f"{fmt(tpot_speedup / ideal if ideal else None, '.2f')} | {chosen_k(r)} | {fill_skipped(r)} | "
                     f"{r.get('retired', 0) if r['k'] else '-'} |")
    return "\n".join(lines)


def side_by_side(results: list[dict], flag: str, name: str) -> str:
    """Tokens/s with an engine flag off and on, measured in one run."""
    by = {(method_name(r), r["batch"], r[flag]): r["tokens_per_s"] for r in results}
    lines = [f"| method | batch | tokens/s, off | tokens/s, {name} | on / off |", "|---|---|---|---|---|"]
    for method, batch in dict.fromkeys((method_name(r), r["batch"]) for r in results):
        off, on = by[method, batch, False], by[method, batch, True]
        lines.append(f"| {method} | {batch} | {off:.0f} | {on:.0f} | {on / off:.2f} |")
    return "\n".join(lines)


def plot(results: list[dict], path: str, device: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(method_name(r) for r in results))
    batches = sorted({r["batch"] for r in results})
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, name in enumerate(names):
        values = [next((r["tokens_per_s"] for r in results if method_name(r) == name and r["batch"] == b), 0)
                  for b in batches]
        ax.bar([j + i * width for j in range(len(batches))], values, width, label=name)
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(batches))], [f"batch {b}" for b in batches])
    ax.set_ylabel("output tokens/s")
    ax.set_title(f"mtpserve offline decode, embedded model, {device}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
