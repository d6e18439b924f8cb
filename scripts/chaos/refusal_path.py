#!/usr/bin/env python3
"""The cost of refusing a burst, alone (R4): mtpserve's HTTP app over a stand-in engine that never
produces output, so that nothing computes; its queue is filled with --queue requests, then a burst
of --n more is sent (chaos.overload), all refused with 503. Prints the refusal latencies and the
server process's CPU seconds for the burst, as JSON.

    python scripts/chaos/refusal_path.py [--n 1000] [--queue 64]

With the real engine (chaos.py overload), the admitted requests' compute shares the cores with the
event loop; this measures what is left when it does not."""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "models" / "tiny-dsv3-mtp"


class NeverAnswers:
    """The C++ engine's interface; requests are taken and stay queued."""

    def __init__(self):
        self.queued = 0

    def add_request(self, request_id, prompt, params):
        self.queued += 1

    def abort(self, request_id):
        self.queued -= 1

    def get_outputs(self, timeout_s):
        time.sleep(timeout_s)
        return []

    def error(self):
        return None

    def stats(self):
        spec = SimpleNamespace(drafts=0, draft_tokens=0, accepted_tokens=0, accepted_per_position=[])
        return SimpleNamespace(running=0, waiting=self.queued, kv_usage=0.0, prompt_tokens=0, generation_tokens=0,
                               prefix_queries=0, prefix_hits=0, preemptions=0, steps=0, spec=spec)


def serve(port: int, queue: int) -> None:
    import uvicorn

    from mtpserve.server.app import build_app
    from mtpserve.server.async_engine import AsyncEngine
    from mtpserve.tokenizer import Tokenizer

    core = SimpleNamespace(engine=NeverAnswers(), tokenizer=Tokenizer.from_dir(MODEL), max_model_len=2048,
                           shutdown=lambda: None)
    app = build_app(AsyncEngine(core, max_queue_len=queue), "m")
    # The event loop `mtpserve serve` runs when it also serves gRPC (chaos.py's servers do).
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio", backlog=2048)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, pid: int, n: int, queue: int) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        fill = [asyncio.ensure_future(client.post("/v1/completions", json={"prompt": "fill", "max_tokens": 8}))
                for _ in range(queue)]
        deadline = time.monotonic() + 60
        while await asyncio.to_thread(chaos.metric, url, "mtpserve:num_requests_waiting") < queue:
            assert time.monotonic() < deadline, "the queue did not fill"
            await asyncio.sleep(0.1)
        before = cpu_seconds(pid)
        out = await chaos.overload(url, n, pid=pid)
        out["server_cpu_s"] = round(cpu_seconds(pid) - before, 3)
        for task in fill:
            task.cancel()
        await asyncio.gather(*fill, return_exceptions=True)
    return {"queue": queue, **out}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--queue", type=int, default=64)
    ns = p.parse_args(argv)
    port = chaos.free_port()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port, ns.queue), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        assert chaos.wait_healthy(url, server.is_alive, 120), "the server did not start"
        print(json.dumps(asyncio.run(measure(url, server.pid, ns.n, ns.queue)), indent=2))
    finally:
        server.terminate()
        server.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
