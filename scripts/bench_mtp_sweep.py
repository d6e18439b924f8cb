#!/usr/bin/env python3
"""MTP-vs-baseline serving sweep: one `mtpserve serve` per method (baseline = no MTP, MTP with a fixed k = 1, 2, 3
draft tokens, and the adaptive policy with k_max = --adaptive-k-max), all started at once on free loopback ports;
at every concurrency, --repeats rounds run the serving benchmark (mtpserve.bench, in-process) against each server
in turn (so a co-tenant's load hits the methods alike), in an order that puts each method after each other one
equally often (mtpserve.bench.run_order), and each method's row is its median-TPOT repeat; then
the servers stop and --out-dir gets:

  results.md                        | method | Concurrency | Mean TPOT(ms) | ... | Acceptance rate | TPOT speedup |
                                    Paired speedup | ...; then the adaptive policy against k = 0 and the best
                                    fixed k at each concurrency (by the median repeats, paired, and each
                                    round's ratio: a miss that one server instance made shows as such)
  throughput_vs_concurrency.png     output tokens/s, one line per method
  tpot_vs_concurrency.png           mean TPOT
  tpot_speedup_vs_concurrency.png   baseline mean TPOT / method mean TPOT at the same concurrency
  sweep.json                        config, hardware, one summary row per method and concurrency (its median
                                    repeat), with every repeat's mean TPOT, [step, target, drafting, drafting's
                                    host work before its launch, the policy's plan] ms per step, its share of
                                    steps at each k, retired sequences and steps without MTP, busiest threads
                                    and the machine's stolen CPU share (each run's, where --rerun-stolen ran
                                    the cell again)
  raw/<method>_c<concurrency>_r<repeat>.json  each run's full result (every request's chunk timestamps)
  server_<method>.log               each server's output

With --isolated only one server is alive at a time: each repeat starts the methods' servers one after another
(in that balanced order), runs every concurrency against it, and stops it, so each repeat meets a fresh
engine instance of every method (on the GPU machine, engine instances of one configuration measured up to 20% apart
in step time, and two servers alive together spread more than one alone). A fresh server then warms up at each
concurrency with max(c, --num-warmups) untimed requests sent c at a time, as a long-running server would be warm.

With --client-cores N the benchmark client runs on N physical cores of its own (every hardware thread of a core
goes to one side) and the servers on the rest, as a client on another host would not share the server's cores.
Either way every repeat records the server's and the client's busiest threads and the CPU each last ran on, and the
share of the machine's CPU time the hypervisor stole meanwhile (the last columns of results.md's per-repeat table):
a server instance slow on the host can be matched with where its engine thread ran and with another guest's load.

Every method sees the same prompts at a given concurrency (the seed is --seed + the concurrency's index, so
consecutive concurrencies do not resend the same prompts into a warm prefix cache). Server flags other than
--model, --port, --num_speculative_tokens and --speculative_policy go after `--`. `Chosen k` is the share of
decode steps at each k, from the server's mtpserve:spec_decode_step_k histogram; sweep.json's client_cpu_busy is how
busy the benchmark client was (1.0: a core throughout, so it may have bounded the run), frontend_busy how busy the
server's HTTP event loop was (near 1: the frontend bounded it), engine_busy how much of the run the server's engine
spent in steps (near 1: the engine bounded it), engine_prompt_steps how much in steps with prompt tokens, and
preemptions how many requests the engine preempted to recompute;
`Engine ms/step` is the mean step, then its target forward (device time on a GPU), where the server counts them.

  .venv/bin/python scripts/bench_mtp_sweep.py --out-dir /tmp/sweep -- --dtype float32
  .venv/bin/python scripts/bench_mtp_sweep.py --model /models/DeepSeek-V3 --ks 0,1,2,3 \\
      --concurrencies 1,2,4,8,16,20,40,80 --dataset-name sharegpt --sharegpt-input-len 2500 \\
      --sharegpt-output-len 1500 --ignore-eos --out-dir /tmp/sweep -- --devices cuda:0
  .venv/bin/python scripts/bench_mtp_sweep.py --out-dir /tmp/sweep --replot   # table+plots from sweep.json

With no --model the server runs the embedded tiny model, which was trained on ShareGPT minus the held-out
split, so ShareGPT prompts then default to --sharegpt-split held-out.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from mtpserve.bench import cpu_placement as placement  # noqa: E402
from mtpserve.bench.run_order import balanced_order  # noqa: E402
from mtpserve.bench.runner import add_bench_args, config_from_args  # noqa: E402

SWEEP_SKIP = ("base_url", "host", "port", "model", "served_model_name", "num_prompts", "max_concurrency",
              "save_result")
COLUMNS = ("method", "Concurrency", "Mean TPOT(ms)", "Mean TTFT(ms)", "Output Tokens/s", "Total Tokens/s",
           "Acceptance rate", "TPOT speedup", "Paired speedup", "Chosen k 0/1/2/3 (%)", "Retired", "Engine busy (%)",
           "Engine ms/step (target)")


def _int_list(value: str) -> list[int]:
    try:
        items = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None
    if not items or any(v < 0 for v in items):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {value!r}")
    return items


def method_name(k: int, policy: str = "fixed") -> str:
    if k == 0:
        return "baseline"
    return f"MTP adaptive k_max={k}" if policy == "adaptive" else f"MTP k={k}"


def method_order(row: dict) -> tuple:
    return row.get("policy", "fixed") == "adaptive", row["k"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model directory to serve (default: the embedded tiny model)")
    p.add_argument("--ks", type=_int_list, default=[0, 1, 2, 3],
                   help="--num_speculative_tokens of each method; 0 is the baseline (default 0,1,2,3)")
    p.add_argument("--adaptive-k-max", type=_int_list, default=[],
                   help="also the adaptive policy with each of these k_max (e.g. 3)")
    p.add_argument("--repeats", type=int, default=1,
                   help="runs per method and concurrency; the median-TPOT one is kept")
    p.add_argument("--concurrencies", type=_int_list, default=[1, 2, 4, 8, 16, 20, 40, 80])
    p.add_argument("--num-prompts", type=int, default=None, help="prompts per run (default: max(F*c, M), "
                                                                 "F = --prompts-factor, M = --min-prompts)")
    p.add_argument("--prompts-factor", type=int, default=2)
    p.add_argument("--min-prompts", type=int, default=16)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--server-cmd", default=f"{shlex.quote(sys.executable)} -m mtpserve.cli serve",
                   help="command that starts the server, before its flags")
    p.add_argument("--server-timeout", type=float, default=600.0, help="seconds to wait for /health")
    p.add_argument("--isolated", action="store_true",
                   help="one server alive at a time, started afresh for each repeat (see above)")
    p.add_argument("--client-cores", type=int, default=None,
                   help="keep this benchmark client on its own N physical cores (all their hardware threads) and the "
                        "servers on the rest, as a client on another host would be (default: no pinning)")
    p.add_argument("--rerun-stolen", type=float, default=None, metavar="PCT",
                   help="run a cell again while the hypervisor stole more than PCT%% of the machine's CPU time during "
                        "it, at most --max-reruns times, for every method alike; the last run is kept and every run's "
                        "share shown (default: never). On a 2-core VM a cell's slowest round was the one with the "
                        "most stolen time in 32 of 40 cells: another guest's load, marked by a share of about 1%%")
    p.add_argument("--max-reruns", type=int, default=2, help="most reruns of one cell under --rerun-stolen")
    p.add_argument("--replot", action="store_true", help="only rewrite results.md and the plots from sweep.json")
    bench = p.add_argument_group("benchmark flags (as `mtpserve bench`)")
    add_bench_args(bench, skip=SWEEP_SKIP)
    p.set_defaults(sharegpt_split=None)
    return p


def num_prompts(ns, concurrency: int) -> int:
    return ns.num_prompts or max(ns.prompts_factor * concurrency, ns.min_prompts)


# ---- server -------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(server_cmd: list[str], model: str | None, k: int, policy: str, port: int, extra: list[str],
                 log_path: Path, append: bool = False, cpus: set[int] | None = None):
    cmd = list(server_cmd) + (["--model", model] if model else []) + [
        "--port", str(port), "--num_speculative_tokens", str(k), "--speculative_policy", policy] + list(extra)
    log = open(log_path, "a" if append else "w", encoding="utf-8")
    log.write("$ " + shlex.join(cmd) + "\n")
    log.flush()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO), preexec_fn=pin)
    proc.log_file = log
    return proc, cmd


def wait_healthy(proc, base_url: str, timeout_s: float, log_path: Path) -> None:
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before it was healthy:\n"
                               + _tail(log_path))
        try:
            with urllib.request.urlopen(base_url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    print(f"   {base_url} healthy after {time.monotonic() - started:.1f} s", flush=True)
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the server was not healthy after {timeout_s:.0f} s:\n" + _tail(log_path))


def stop_server(proc, timeout_s: float = 30.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # uvicorn shuts down cleanly
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    proc.log_file.close()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def file_name(method: str) -> str:
    return method.replace(' ', '_').replace('=', '')


# ---- results ------------------------------------------------------------------------------------------------


def summary_row(method: str, k: int, policy: str, concurrency: int, result, threads: dict | None = None) -> dict:
    m, s, engine = result.metrics, result.spec_decode or {}, result.engine or {}
    return {"method": method, "k": k, "policy": policy, "concurrency": concurrency, "num_prompts": len(result.records),
            "completed": m.completed, "failed": m.failed, "duration_s": m.duration_s,
            "mean_tpot_ms": m.latency["tpot"]["mean"], "median_tpot_ms": m.latency["tpot"]["median"],
            "mean_ttft_ms": m.latency["ttft"]["mean"], "median_ttft_ms": m.latency["ttft"]["median"],
            "mean_itl_ms": m.latency["itl"]["mean"], "mean_e2el_ms": m.latency["e2el"]["mean"],
            "output_throughput": m.output_throughput, "total_token_throughput": m.total_token_throughput,
            "request_throughput": m.request_throughput, "total_input": m.total_input,
            "total_output": m.total_output, "mean_tokens_per_chunk": m.mean_tokens_per_chunk,
            "acceptance_rate": s.get("acceptance_rate"), "mean_acceptance_length": s.get("mean_acceptance_length"),
            "acceptance_rate_per_position": s.get("acceptance_rate_per_position"),
            "steps_by_k": s.get("steps_by_k"), "retired_sequences": s.get("retired_sequences"),
            "fill_skipped_steps": s.get("fill_skipped_steps"), "draft_seconds": s.get("draft_seconds"),
            "client_cpu_busy": result.client_cpu_busy, "frontend_busy": engine.get("frontend_busy"),
            "engine_busy": engine.get("busy"),
            "engine_prompt_steps": engine.get("prompt_steps"), "engine_steps": engine.get("steps"),
            "step_ms": engine.get("step_ms"), "target_ms": engine.get("target_ms"),
            "sample_ms": engine.get("sample_ms"), "draft_host_ms": engine.get("draft_host_ms"),
            "plan_ms": engine.get("plan_ms"),
            "preemptions": engine.get("preemptions"), "server_mean_ttft_ms": engine.get("server_ttft_ms"),
            "server_mean_tpot_ms": engine.get("server_tpot_ms"), "server_mean_e2el_ms": engine.get("server_e2el_ms"),
            "threads": threads}


def median_row(rows: list[dict]) -> dict:
    """The repeat with the median mean TPOT, with every repeat's TPOT, engine step times and drafting beside it (with
    --isolated a repeat is a server instance of its own, and instances differ: the step times say where, and a
    repeat whose steps ran k = 0 more often than the median one's keeps its counts here)."""
    ordered = sorted(rows, key=lambda r: r["mean_tpot_ms"] if r["mean_tpot_ms"] is not None else float("inf"))
    return {**ordered[len(ordered) // 2], "repeats_mean_tpot_ms": [r["mean_tpot_ms"] for r in rows],
            "repeats_step_ms": [[r["step_ms"], r["target_ms"], draft_ms_per_step(r), r["draft_host_ms"],
                                 r.get("plan_ms")] for r in rows],
            "repeats_drafting": [{key: r.get(key) for key in ("steps_by_k", "retired_sequences", "fill_skipped_steps")}
                                 for r in rows],
            "repeats_threads": [r.get("threads") for r in rows]}


def draft_ms_per_step(row: dict) -> float | None:
    steps = row["engine_steps"]
    return 1000 * row["draft_seconds"] / steps if steps and row["draft_seconds"] is not None else None


def chosen_k(row: dict) -> str:
    by_k = row.get("steps_by_k") or []
    total = sum(by_k)
    return "-" if not total else " / ".join(f"{100 * n / total:.0f}" for n in by_k)


def step_ms(row: dict) -> str:
    whole, target = row.get("step_ms"), row.get("target_ms")
    return "-" if whole is None else f"{whole:.3f}" + ("" if target is None else f" ({target:.3f})")


def baselines(rows: list[dict]) -> dict[int, dict]:
    """The k = 0 row of each concurrency."""
    return {r["concurrency"]: r for r in rows if r["k"] == 0}


def add_speedups(rows: list[dict]) -> None:
    """speedup = baseline mean TPOT / this method's mean TPOT at the same concurrency (None without a baseline);
    paired speedup = the median over repeats of that ratio within each repeat (paired_ratio)."""
    base = baselines(rows)
    for r in rows:
        b, t = base.get(r["concurrency"], {}).get("mean_tpot_ms"), r["mean_tpot_ms"]
        r["tpot_speedup"] = b / t if b and t else None
        r["paired_tpot_speedup"] = paired_ratio(base.get(r["concurrency"]), r)


def round_ratios(numerator: dict | None, denominator: dict | None) -> list[float] | None:
    """numerator's mean TPOT / denominator's in each round. Repeat i of every method runs in round i, so each ratio
    cancels what changed between rounds (the machine's clocks, a co-tenant); with --isolated it still holds two
    server instances, which differ by several percent. None unless both have every repeat's TPOT."""
    a = (numerator or {}).get("repeats_mean_tpot_ms") or []
    b = (denominator or {}).get("repeats_mean_tpot_ms") or []
    if not a or len(a) != len(b) or None in a or None in b:
        return None
    return [x / y for x, y in zip(a, b)]


def paired_ratio(numerator: dict | None, denominator: dict | None) -> float | None:
    """The median of round_ratios; the median row of each method may come from different rounds, these do not."""
    ratios = round_ratios(numerator, denominator)
    return statistics.median(ratios) if ratios else None


def _rounds(numerator: dict | None, denominator: dict | None) -> str:
    ratios = round_ratios(numerator, denominator)
    return " / ".join(f"{x:.3f}" for x in ratios) if ratios else "-"


def verdict_table(rows: list[dict]) -> str:
    """Per concurrency, the adaptive policy against k = 0 and against the fixed k with the best TPOT speedup, by the
    median repeats' TPOT and paired (paired_ratio): never slower than k = 0, and near the best fixed k. Each round's
    ratio is listed beside them, so a reader sees whether a miss held in every round or came from one server
    instance. Reads the speedups against k = 0 that add_speedups left in the rows."""
    out = ["| Concurrency | method | vs baseline | paired | each round | best fixed k | vs best fixed k | paired "
           "| each round |", "|---:|---|---:|---:|---|---|---:|---:|---|"]
    base = baselines(rows)
    for r in sorted((r for r in rows if r.get("policy") == "adaptive"), key=lambda r: (r["k"], r["concurrency"])):
        c = r["concurrency"]
        fixed = [f for f in rows if f["k"] > 0 and f.get("policy", "fixed") == "fixed" and f["concurrency"] == c
                 and f.get("mean_tpot_ms")]
        best = min(fixed, key=lambda f: f["mean_tpot_ms"]) if fixed else None
        versus_best = best["mean_tpot_ms"] / r["mean_tpot_ms"] if best and r.get("mean_tpot_ms") else None
        out.append("| " + " | ".join([
            str(c), r["method"], _fmt(r.get("tpot_speedup"), ".3f"), _fmt(r.get("paired_tpot_speedup"), ".3f"),
            _rounds(base.get(c), r), best["method"] if best else "-", _fmt(versus_best, ".3f"),
            _fmt(paired_ratio(best, r), ".3f"), _rounds(best, r)]) + " |")
    return "\n".join(out) + "\n"


def repeats_table(rows: list[dict]) -> str:
    """Every repeat of each method and concurrency (repeat i ran in round i): its mean TPOT and the engine's ms per
    step, whole, in the target forward, in the drafting, in the drafting's host work before its launch and in the
    policy's plan (a part of that host work, or beside the target forward where the engine plans ahead), then the
    server's and the client's busiest threads (share of a core @ the CPU it last ran on) and the share of the
    machine's CPU time the hypervisor stole meanwhile (another guest's load). With --isolated each
    repeat is a server instance of its own, and these say where a slow one lost its time. Then the share of its
    decode steps at each k, and its retired sequences and steps that ran no MTP forward (every sequence retired or
    done: a retired request alone at a cell's end runs such steps)."""
    out = ["| method | Concurrency | repeat | Mean TPOT(ms) | step | target | draft | draft host | plan "
           "| chosen k (%) | retired / steps without MTP | server threads | client threads | stolen (%) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for r in sorted(rows, key=lambda r: (method_order(r), r["concurrency"])):
        steps, threads = r.get("repeats_step_ms") or [], r.get("repeats_threads") or []
        drafting = r.get("repeats_drafting") or []
        for i, tpot in enumerate(r.get("repeats_mean_tpot_ms") or []):
            times = steps[i] if i < len(steps) else []
            placed = (threads[i] if i < len(threads) else None) or {}
            drafted = (drafting[i] if i < len(drafting) else None) or {}
            out.append("| " + " | ".join([r["method"], str(r["concurrency"]), str(i), _fmt(tpot, ".3f")] +
                                         [_fmt(t, ".3f") for t in (list(times) + [None] * 5)[:5]] +
                                         [chosen_k(drafted), retired_cell(drafted),
                                          threads_cell(placed.get("server")), threads_cell(placed.get("client")),
                                          stolen_cell(placed)])
                       + " |")
    return "\n".join(out) + "\n"


def retired_cell(drafting: dict) -> str:
    if not drafting.get("steps_by_k"):
        return "-"
    return f"{_fmt(drafting.get('retired_sequences'), 'd')} / {_fmt(drafting.get('fill_skipped_steps'), 'd')}"


def threads_cell(threads: list | None) -> str:
    """Threads busier than a tenth of a core: name share@CPU."""
    busy = [f"{name} {share:.2f}@{cpu}" for name, share, cpu in threads or [] if share and share >= 0.1]
    return ", ".join(busy) or "-"


def rerun_due(stolen_runs: list[float], threshold_pct: float | None, max_reruns: int) -> bool:
    """Whether --rerun-stolen asks for another run of a cell, given the stolen share of each run so far."""
    last = stolen_runs[-1]
    if threshold_pct is None or last is None:
        return False
    return 100 * last > threshold_pct and len(stolen_runs) <= max_reruns


def stolen_cell(placed: dict) -> str:
    """The kept run's stolen share (%), after those of the runs it replaced, if any."""
    share = placed.get("stolen")
    if share is None:
        return "-"
    replaced = placed.get("stolen_runs", [share])[:-1]
    kept = f"{100 * share:.2f}"
    return f"{kept} (reran after {', '.join(f'{100 * s:.2f}' for s in replaced)})" if replaced else kept


def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def markdown_table(rows: list[dict]) -> str:
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] + ["---:"] * (len(COLUMNS) - 1)) + "|"]
    for r in sorted(rows, key=lambda r: (method_order(r), r["concurrency"])):
        acc, busy = r["acceptance_rate"], r.get("engine_busy")
        out.append("| " + " | ".join([
            r["method"], str(r["concurrency"]), _fmt(r["mean_tpot_ms"], ".2f"), _fmt(r["mean_ttft_ms"], ".2f"),
            _fmt(r["output_throughput"], ".2f"), _fmt(r["total_token_throughput"], ".2f"),
            "-" if acc is None else f"{100 * acc:.1f}%", _fmt(r.get("tpot_speedup"), ".2f") +
            ("x" if r.get("tpot_speedup") is not None else ""), _fmt(r.get("paired_tpot_speedup"), ".2f"),
            chosen_k(r),
            _fmt(r.get("retired_sequences"), "d"), _fmt(None if busy is None else 100 * busy, ".0f"),
            step_ms(r)]) + " |")
    failed = [r for r in rows if r["failed"]]
    if failed:
        out.append("")
        out.append("Failed requests: " + ", ".join(f"{r['method']} at concurrency {r['concurrency']}: "
                                                  f"{r['failed']} of {r['num_prompts']}" for r in failed))
    return "\n".join(out) + "\n"


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = sorted({(method_order(r), r["method"]) for r in rows})
    concurrencies = sorted({r["concurrency"] for r in rows})
    paths = []
    for key, ylabel, title, name in (
            ("output_throughput", "output tokens/s", "Output throughput vs concurrency", "throughput_vs_concurrency"),
            ("mean_tpot_ms", "mean TPOT (ms)", "TPOT vs concurrency", "tpot_vs_concurrency"),
            ("tpot_speedup", "TPOT speedup over baseline (x)", "TPOT speedup vs concurrency",
             "tpot_speedup_vs_concurrency")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for _, method in methods:
            pts = sorted((r["concurrency"], r.get(key)) for r in rows
                         if r["method"] == method and r.get(key) is not None)
            if pts:
                ax.plot([c for c, _ in pts], [v for _, v in pts], marker="o", label=method)
        if key == "tpot_speedup":
            ax.axhline(1.0, color="gray", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(concurrencies)
        ax.set_xticklabels([str(c) for c in concurrencies])
        ax.set_xlabel("max concurrency")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def hardware() -> dict:
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "physical_cores": placement.physical_cores(set(range(os.cpu_count() or 1)))}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            info["cpu_model"] = names[0]
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            info["gpus"] = out.stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def write_outputs(sweep: dict, out_dir: Path) -> None:
    add_speedups(sweep["rows"])
    (out_dir / "sweep.json").write_text(json.dumps(sweep, indent=1) + "\n", encoding="utf-8")
    header = f"Command: `{sweep['command']}`\n\n" if sweep.get("command") else ""
    verdict = ""
    if any(r.get("policy") == "adaptive" for r in sweep["rows"]):
        verdict = "\nThe adaptive policy against k = 0 and the best fixed k (TPOT speedups):\n\n" + \
            verdict_table(sweep["rows"])
    repeats = "\nEach repeat (ms; with --isolated, a server instance of its own):\n\n" + repeats_table(sweep["rows"])
    (out_dir / "results.md").write_text(header + markdown_table(sweep["rows"]) + verdict + repeats, encoding="utf-8")


# ---- main ---------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["scripts/bench_mtp_sweep.py"] + argv)
    server_extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, server_extra = argv[:i], argv[i + 1:]
    ns = build_parser().parse_args(argv)
    out_dir = Path(ns.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if ns.replot:
        sweep = json.loads((out_dir / "sweep.json").read_text(encoding="utf-8"))
        write_outputs(sweep, out_dir)
        plot(sweep["rows"], out_dir)
        print(markdown_table(sweep["rows"]))
        return 0

    from mtpserve.bench.datasets import load_tokenizer
    from mtpserve.bench.runner import run

    if ns.sharegpt_split is None:
        from mtpserve.engine_args import DEFAULT_MODEL

        embedded = ns.model is None or Path(ns.model).resolve() == DEFAULT_MODEL.resolve()
        ns.sharegpt_split = "held-out" if embedded else "all"
    server_cpus = None
    if ns.client_cores is not None:
        client_cpus, server_cpus = placement.split_cores(ns.client_cores)
        os.sched_setaffinity(0, client_cpus)
        print(f"client on CPUs {placement.compact(client_cpus)}, servers on {placement.compact(server_cpus)}",
              flush=True)
    tokenizer = load_tokenizer(ns.tokenizer, ns.model)
    (out_dir / "raw").mkdir(exist_ok=True)
    server_cmd = shlex.split(ns.server_cmd)
    sweep = {"command": command,
             "model": ns.model, "ks": ns.ks, "adaptive_k_max": ns.adaptive_k_max, "repeats": ns.repeats,
             "concurrencies": ns.concurrencies, "server_extra_flags": server_extra,
             "cpus": None if server_cpus is None else {"client": placement.compact(client_cpus),
                                                       "server": placement.compact(server_cpus)},
             "bench_config": None, "hardware": hardware(), "rows": [], "errors": []}
    errors = []
    methods = [(k, "fixed") for k in ns.ks] + [(k, "adaptive") for k in ns.adaptive_k_max]
    servers = {}
    cells = {}  # (method, concurrency) -> its repeats' rows

    def start(k: int, policy: str, append: bool = False) -> None:
        method = method_name(k, policy)
        log_path = out_dir / f"server_{file_name(method)}.log"
        port = free_port()
        print(f"== {method}: starting the server on 127.0.0.1:{port} (log: {log_path})", flush=True)
        proc, cmd = start_server(server_cmd, ns.model, k, policy, port, server_extra, log_path, append, server_cpus)
        servers[k, policy] = (proc, cmd, f"http://127.0.0.1:{port}", log_path)

    def measure(k: int, policy: str, i: int, repeat: int, warmups: int) -> None:
        proc, cmd, base_url, _ = servers[k, policy]
        c, method = ns.concurrencies[i], method_name(k, policy)
        cfg = config_from_args(ns, base_url=base_url, max_concurrency=c, num_prompts=num_prompts(ns, c),
                               seed=ns.seed + i, save_result=None, num_warmups=warmups)
        stolen_runs = []
        while not stolen_runs or rerun_due(stolen_runs, ns.rerun_stolen, ns.max_reruns):
            if stolen_runs:
                print(f"   {method} c={c} repeat {repeat}: {100 * stolen_runs[-1]:.2f}% of the CPU stolen, "
                      "running it again", flush=True)
            before, started = placement.thread_times(proc.pid), time.monotonic()
            client_before, machine_before = placement.thread_times(os.getpid()), placement.machine_times()
            result = run(cfg, tokenizer)
            seconds = time.monotonic() - started
            stolen_runs.append(placement.stolen_share(machine_before, placement.machine_times()))
        threads = {"server": placement.busy_threads(before, placement.thread_times(proc.pid), seconds),
                   "client": placement.busy_threads(client_before, placement.thread_times(os.getpid()), seconds),
                   "stolen": stolen_runs[-1], "stolen_runs": stolen_runs}
        result.save(out_dir / "raw" / f"{file_name(method)}_c{c}_r{repeat}.json")
        row = summary_row(method, k, policy, c, result, threads)
        row["server_command"] = shlex.join(cmd)
        cells.setdefault((method, c), []).append(row)
        if sweep["bench_config"] is None:
            config = result.to_dict(with_records=False)["config"]
            sweep["bench_config"] = {key: v for key, v in config.items()
                                     if key not in ("base_url", "max_concurrency", "num_prompts", "seed")}
        acc = row["acceptance_rate"]
        print(f"   {method} c={c} repeat {repeat}: {row['completed']}/{row['num_prompts']} ok, mean TPOT "
              f"{_fmt(row['mean_tpot_ms'], '.2f')} ms, mean TTFT {_fmt(row['mean_ttft_ms'], '.2f')} ms, "
              f"{row['output_throughput']:.1f} out tok/s"
              + (f", acceptance {100 * acc:.1f}%" if acc is not None else "")
              + (f", chosen k {chosen_k(row)}" if row["steps_by_k"] else ""), flush=True)
        sweep["rows"] = [median_row(rows) for rows in cells.values()]
        write_outputs(sweep, out_dir)  # partial results survive an interrupted sweep

    try:
        bad = [c for c in ns.concurrencies if c <= 0]
        if bad:
            raise ValueError(f"concurrency must be positive, got {bad[0]}")
        if ns.isolated:
            for repeat in range(ns.repeats):
                for k, policy in balanced_order(methods, repeat):
                    start(k, policy, append=repeat > 0)
                    proc, _, base_url, log_path = servers[k, policy]
                    wait_healthy(proc, base_url, ns.server_timeout, log_path)
                    for i, c in enumerate(ns.concurrencies):
                        measure(k, policy, i, repeat, max(c, ns.num_warmups))
                    stop_server(servers.pop((k, policy))[0])
        else:
            for k, policy in methods:
                start(k, policy)
            for proc, _, base_url, log_path in servers.values():
                wait_healthy(proc, base_url, ns.server_timeout, log_path)
            for i in range(len(ns.concurrencies)):
                for repeat in range(ns.repeats):
                    for k, policy in balanced_order(methods, repeat):
                        measure(k, policy, i, repeat, ns.num_warmups)
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
        print("   error: " + msg, file=sys.stderr, flush=True)
        errors.append(msg)
        sweep["errors"].append(msg)
    finally:
        for proc, _, _, _ in servers.values():
            stop_server(proc)
    write_outputs(sweep, out_dir)
    if sweep["rows"]:
        for path in plot(sweep["rows"], out_dir):
            print(f"wrote {path}")
    print(markdown_table(sweep["rows"]))
    print(f"wrote {out_dir / 'results.md'} and {out_dir / 'sweep.json'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
