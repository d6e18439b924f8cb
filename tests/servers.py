"""Starting `mtpserve serve` processes in tests, and waiting, boundedly, until they (or anything else) answer."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx

from mtpserve.client import MtpserveError


def start_serve(*flags: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mtpserve.cli", "serve", *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def wait_for(predicate, what: str, timeout_s: float = 60.0) -> None:
    """Polls predicate() until it holds; fails naming `what` if the deadline passes first."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def wait_until_healthy(client, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """Polls client.health() until it says yes; fails if the process dies or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if client.health():
                return
        except MtpserveError:
            pass
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "server did not come up"
        time.sleep(0.1)


def wait_until_idle(engine, timeout_s=10.0):
    """No request left in the AsyncEngine and every KV block free (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = engine.stats()
        if s.kv_usage == 0 and s.running == 0 and s.waiting == 0 and engine.num_open_streams == 0:
            return
        assert time.monotonic() < deadline, (f"engine not idle: kv_usage={s.kv_usage} running={s.running} "
                                             f"waiting={s.waiting} open_streams={engine.num_open_streams}")
        time.sleep(0.02)


def ended_state(served, request_id, timeout_s=10.0):
    """The engine's final state of request `request_id` (a served test server records every ended request in
    `served.ended`), once it has ended; fails if it has not within the bound."""
    def state():
        return next((s for s in list(served.ended) if s.request_id == request_id), None)

    wait_for(lambda: state() is not None, f"request {request_id} to end on the server", timeout_s)
    return state()


def assert_sigterm_drains(proc: subprocess.Popen, url: str) -> None:
    """A stream of 200 tokens runs; SIGTERM to `proc` lets it finish (finish_reason "length"), then the process
    exits 0."""
    events, first = [], threading.Event()

    def stream():
        body = {"prompt": "the quick brown fox", "max_tokens": 200, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
                    first.set()
        first.set()

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    assert first.wait(60)
    proc.send_signal(signal.SIGTERM)
    t.join(120)
    assert not t.is_alive()
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert sum(len(e["choices"][0]["text"]) > 0 for e in events) > 1
    assert proc.wait(60) == 0, proc.stdout.read()
