#!/usr/bin/env python3
"""Idle RSS of `mtpserve serve` after repeated streaming storms (issue 17 item 11).

    python scripts/chaos/rss_probe.py [--rounds 5] [--clients 200] [--env MALLOC_ARENA_MAX=2] [-- serve flags]

Prints one JSON line per round: the server's idle RSS (VmRSS) and, from /proc/PID/smaps_rollup
and /proc/PID/status, anonymous memory and the thread count, so that a plateau (allocator
caching) can be told from steady growth (a leak)."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos  # noqa: E402


def snapshot(pid: int) -> dict:
    status = {line.split(":")[0]: line.split(":", 1)[1].strip()
              for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line}
    rollup = {line.split(":")[0]: line.split(":", 1)[1].strip()
              for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:] if ":" in line}
    mb = lambda v: round(int(v.split()[0]) / 1024, 1)  # noqa: E731  (kB -> MB)
    return {"rss_mb": mb(status["VmRSS"]), "anon_mb": mb(rollup.get("Anonymous", "0 kB")),
            "threads": int(status["Threads"])}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server")
    p.add_argument("flags", nargs="*")
    ns = p.parse_args()
    for item in ns.env:
        name, _, value = item.partition("=")
        os.environ[name] = value
    server = chaos.Server(*ns.flags)
    try:
        print(json.dumps({"round": "start", **snapshot(server.proc.pid)}), flush=True)
        for i in range(ns.rounds):
            asyncio.run(chaos.storm(server.url, ns.clients, seed=i))
            time.sleep(2)
            print(json.dumps({"round": i + 1, **snapshot(server.proc.pid)}), flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
