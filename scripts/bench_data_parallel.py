#!/usr/bin/env python3
"""Rank layouts side by side on one machine: one server per layout (`mtpserve launch`), all started at once on
loopback, then --repeats rounds in which every layout in turn answers the same load (a co-tenant's load hits
them alike): at each concurrency C, C greedy requests of --max-tokens tokens (ignore_eos) at once. Per layout
and concurrency: output tokens/s of the round (C * max_tokens over its wall time), median over the repeats,
and the ratio to the first layout. Layouts: one rank, TP 2, DP 2 (two attention groups of one rank), EP 2 with
TP 2 attention, EP 2 with DP 2 (lockstep).

  .venv/bin/python scripts/bench_data_parallel.py --concurrency 1,8 --repeats 3 -- --dtype float32
"""
from __future__ import annotations

import argparse
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from bench_mtp_sweep import wait_healthy  # noqa: E402
from mtpserve.launch import free_port_pair  # noqa: E402

SERVER_TIMEOUT_S = 600.0  # bench_mtp_sweep's default --server-timeout

LAYOUTS = {
    "1 rank": ["--nnodes=1"],
    "TP 2": ["--nnodes=2"],
    "DP 2": ["--nnodes=2", "--dp_size=2"],
    "EP 2, TP 2 attention": ["--nnodes=2", "--ep_size=2"],
    "EP 2, DP 2": ["--nnodes=2", "--ep_size=2", "--dp_size=2"],
}
PROMPTS = ["the quick brown fox", "hello there, how are you", "one two three four five six", "a", "what is MTP",
           "tell me a story", "numbers: 1 2 3", "good morning"]


def start(name: str, flags: list[str], server_flags: list[str], log_dir: Path) -> tuple[subprocess.Popen, str, Path]:
    port = free_port_pair()
    log_path = log_dir / f"{name.replace(' ', '_').replace(',', '')}.log"
    proc = subprocess.Popen([sys.executable, "-m", "mtpserve.cli", "launch", *flags, f"--port={port}",
                             "--log_level=warning", *server_flags], stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}", log_path


def one_round(url: str, concurrency: int, max_tokens: int) -> float:
    """Output tokens/s of `concurrency` requests sent at once."""
    errors: list[str] = []

    def one(i: int) -> None:
        r = httpx.post(url + "/v1/completions", timeout=600, json={
            "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True})
        if r.status_code != 200:
            errors.append(r.text)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(concurrency)]
    start_s = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return concurrency * max_tokens / (time.perf_counter() - start_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--log-dir", default="/tmp/bench_data_parallel")
    parser.add_argument("server_flags", nargs="*", help="after --: flags for every server")
    ns = parser.parse_args()
    concurrencies = [int(c) for c in ns.concurrency.split(",")]
    log_dir = Path(ns.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = {name: start(name, flags, ns.server_flags, log_dir) for name, flags in LAYOUTS.items()}
    try:
        for proc, url, log_path in servers.values():
            wait_healthy(proc, url, SERVER_TIMEOUT_S, log_path)
            one_round(url, 2, 8)  # warm-up
        rates: dict[tuple[str, int], list[float]] = {}
        for _ in range(ns.repeats):
            for c in concurrencies:
                for name, (_, url, _) in servers.items():
                    rates.setdefault((name, c), []).append(one_round(url, c, ns.max_tokens))
    finally:
        for proc, _, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _, _ in servers.values():
            proc.wait(60)
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"server flags: {' '.join(ns.server_flags) or '(none)'}, {ns.max_tokens} tokens per request, median of "
          f"{ns.repeats}\n")
    print("| layout | " + " | ".join(f"c = {c}: tok/s | vs {next(iter(LAYOUTS))}" for c in concurrencies) + " |")
    print("|---|" + "---|---|" * len(concurrencies))
    for name in LAYOUTS:
        cells = []
        for c in concurrencies:
            median = statistics.median(rates[(name, c)])
            base = statistics.median(rates[(next(iter(LAYOUTS)), c)])
            cells += [f"{median:.1f}", f"{median / base:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
