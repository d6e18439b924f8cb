#!/usr/bin/env python3
"""Chaos runs against `mtpserve serve` on loopback (issue 17), bounded in count and time.

    python scripts/chaos/chaos.py http-fuzz   --url URL [--n 10000] [--concurrency 16]
    python scripts/chaos/chaos.py schema-fuzz --url URL [--examples 500] [--api_key KEY]   (schemathesis)
    python scripts/chaos/chaos.py grpc-fuzz   --target HOST:PORT [--n 1000]
    python scripts/chaos/chaos.py storm       --url URL [--clients 500] [--drop 0.3]
    python scripts/chaos/chaos.py overload    --url URL [--n 1000]
    python scripts/chaos/chaos.py rank-kill   [--which worker|master]   (mtpserve launch --nnodes 2)
    python scripts/chaos/chaos.py drain       [--shutdown_timeout S]    (SIGTERM under 20 streams)
    python scripts/chaos/chaos.py all         [--short]   (starts its own servers; prints JSON figures)

Every scenario returns a dict of figures; `all` starts the servers itself (the embedded tiny
model, MTP k = 1), runs R1..R5 of the issue and prints one JSON document. The short form is what
tests/test_chaos.py runs in CI. Loopback only: the servers bind 127.0.0.1 and nothing else is
contacted."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
OPENAI_ERROR_KEYS = {"message", "type", "param", "code"}


# ---- helpers ------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (VmRSS), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def wait_healthy(url: str, alive, timeout_s: float) -> bool:
    """Polls /health until it answers 200 (True), or until `alive()` turns false or timeout_s passes."""
    deadline = time.monotonic() + timeout_s
    while alive() and time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def openai_error_body(response) -> bool:
    """Whether an error response's body is in OpenAI's error format."""
    try:
        return set(response.json()["error"]) == OPENAI_ERROR_KEYS
    except Exception:
        return False


def metric(url: str, name: str, headers=None) -> float:
    text = httpx.get(url + "/metrics", headers=headers, timeout=30).text
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    if not found:
        raise KeyError(name)
    return total


class Server:
    """`mtpserve serve` on 127.0.0.1 as a child process (the embedded tiny model unless --model)."""

    def __init__(self, *flags: str, grpc: bool = False, model: str | None = None):
        self.port = free_port()
        self.grpc_port = free_port() if grpc else 0
        cmd = [sys.executable, "-m", "mtpserve.cli", "serve", f"--port={self.port}", "--host=127.0.0.1",
               "--log_level=warning", *flags]
        if grpc:
            cmd.append(f"--grpc_port={self.grpc_port}")
        if model:
            cmd += ["--model", model]
        self.log = open(Path(os.environ.get("CHAOS_LOG_DIR", "/tmp")) / f"chaos-serve-{self.port}.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.url = f"http://127.0.0.1:{self.port}"
        if not wait_healthy(self.url, lambda: self.proc.poll() is None, 300):
            raise RuntimeError(f"the server did not start; see {self.log.name}")

    @property
    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def stop(self, timeout_s: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def valid_request_ok(url: str, headers: dict | None = None) -> bool:
    r = httpx.post(url + "/v1/completions", json={"prompt": "hello", "max_tokens": 4}, headers=headers, timeout=60)
    return r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length")


# ---- R1: HTTP fuzz ------------------------------------------------------------------------------

_WEIRD_VALUES = [None, True, -1, 0, 1, 2**31, 2**63, 2**64, -(2**63) - 1, 10**30, 1e308, -1e308, 0.5, "x", "",
                 "\ud800", "a\udfffb", "\x00", "🙂" * 50, [], [[]], [-1], [2**64], [[1, 2], [3]], {}, {"a": 1},
                 "nan", [None], ["\ud800"], "x" * 5000]
_FIELDS = ["prompt", "messages", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop",
           "stop_token_ids", "n", "best_of", "logprobs", "top_logprobs", "stream", "stream_options", "logit_bias",
           "presence_penalty", "frequency_penalty", "model", "echo", "suffix", "ignore_eos", "max_completion_tokens",
           "tools", "response_format", "include_stop_str_in_output", "skip_special_tokens"]


def _fuzz_body(rng: random.Random, route: str) -> tuple[bytes, dict]:
    """A malformed (or odd) request body and headers."""
    kind = rng.random()
    headers = {"content-type": "application/json"}
    if kind < 0.15:  # not JSON
        raw = rng.choice([b"{", b"", b"null", b"[1,2", b"\xff\xfe\x00", bytes(rng.randrange(256) for _ in range(64)),
                          b'{"prompt": "x"' * 3, b'{"prompt": "\\ud800"}', b'{"a": ' * 200 + b'1' + b'}' * 200])
        return raw, headers
    if kind < 0.2:  # valid JSON, wrong top-level shape
        return json.dumps(rng.choice([[], 1, "s", None, [{"prompt": "x"}]])).encode(), headers
    if kind < 0.25:  # odd content types
        headers = {"content-type": rng.choice(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                               "application/json; charset=latin-1"])}
    body: dict = {"prompt": "hello"} if route.endswith("/completions") and "chat" not in route else \
        {"messages": [{"role": "user", "content": "hello"}]}
    body["max_tokens"] = 2
    for _ in range(rng.randint(1, 4)):
        body[rng.choice(_FIELDS)] = rng.choice(_WEIRD_VALUES)
    if rng.random() < 0.2:
        body["messages"] = rng.choice([[{"role": "wizard", "content": "x"}], [{"content": 5}], [{"role": "user"}],
                                       [{"role": "user", "content": [{"type": "image_url"}]}], "hi", [[]]])
    raw = json.dumps(body, ensure_ascii=rng.random() < 0.5, allow_nan=True).encode("utf-8", "surrogatepass")
    return raw, headers


async def http_fuzz(url: str, n: int = 10000, concurrency: int = 16, seed: int = 0, api_key: str | None = None) -> dict:
    rng = random.Random(seed)
    routes = [("POST", "/v1/completions")] * 6 + [("POST", "/v1/chat/completions")] * 6 + [
        ("GET", "/v1/models"), ("GET", "/v1/models/../../etc/passwd"), ("POST", "/v1/models"), ("DELETE", "/v1/completions"),
        ("GET", "/nope"), ("POST", "/health"), ("GET", "/metrics"), ("PUT", "/v1/chat/completions")]
    statuses: dict[int, int] = {}
    resets, other_errors, bad_format, fivexx = 0, [], 0, []
    queue: asyncio.Queue = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, headers=headers) as client:
        async def worker():
            nonlocal resets, bad_format
            while not queue.empty():
                queue.get_nowait()
                method, route = rng.choice(routes)
                raw, hdrs = _fuzz_body(rng, route) if method in ("POST", "PUT") else (b"", {})
                try:
                    r = await client.request(method, route, content=raw, headers=hdrs)
                except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError) as e:
                    resets += 1
                    other_errors.append(f"{type(e).__name__}: {e} ({method} {route} {raw[:80]!r})")
                    continue
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if r.status_code >= 500:
                    fivexx.append(f"{r.status_code} {method} {route} {raw[:120]!r} -> {r.text[:200]}")
                if r.status_code >= 400:
                    bad_format += not openai_error_body(r)
                elif r.headers.get("content-type", "").startswith("text/event-stream"):
                    pass
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"requests": n, "concurrency": concurrency, "statuses": dict(sorted(statuses.items())),
            "5xx": len(fivexx), "connection_resets": resets, "non_openai_error_bodies": bad_format,
            "examples_5xx": fivexx[:5], "examples_resets": other_errors[:5],
            "valid_request_after": valid_request_ok(url, headers)}


# ---- R1: schemathesis against the server's OpenAPI document --------------------------------------

# Generated values of these fields are capped, so that a case costs milliseconds, not a long generation.
_SCHEMA_FUZZ_CAPS = {"max_tokens": 4, "max_completion_tokens": 4, "min_tokens": 4, "n": 2, "best_of": 2}


def schema_fuzz(url: str, examples: int = 500, api_key: str | None = None) -> dict:
    """schemathesis's cases for every operation of /openapi.json, `examples` valid and `examples`
    invalid ones by the document each (deterministic): statuses, 5xx, connection resets, error
    bodies outside OpenAI's shape, and schemathesis's own checks of each answer against the
    document (status code, content type, response schema)."""
    import requests
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis.checks import content_type_conformance, response_schema_conformance, status_code_conformance

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    schema = schemathesis.openapi.from_url(url + "/openapi.json", headers=headers, timeout=30)
    statuses: dict[int, int] = {}
    fivexx, resets, bad_format, mismatches = [], [], 0, []
    checks = [status_code_conformance, content_type_conformance, response_schema_conformance]
    config = settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate])

    def call(case) -> None:
        nonlocal bad_format
        if isinstance(case.body, dict):
            case.body.setdefault("max_tokens", 4)
            for name, cap in _SCHEMA_FUZZ_CAPS.items():
                if isinstance(case.body.get(name), int) and case.body[name] > cap:
                    case.body[name] = cap
        try:
            r = case.call(base_url=url, headers=headers, timeout=120)
        except requests.ConnectionError as e:
            resets.append(f"{case.operation.label}: {type(e).__name__}: {e}")
            return
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        if r.status_code >= 500:
            fivexx.append(f"{r.status_code} {case.operation.label} {str(case.body)[:120]} -> {r.text[:200]}")
        if r.status_code >= 400:
            bad_format += not openai_error_body(r)
        try:
            case.validate_response(r, checks=checks)
        except BaseExceptionGroup as e:
            mismatches.append(f"{case.operation.label} [{r.status_code}]: " + " | ".join(
                str(x).splitlines()[0] for x in e.exceptions))

    cases = 0
    for operation in (result.ok() for result in schema.get_all_operations()):
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            before = sum(statuses.values()) + len(resets)
            try:
                config(given(operation.as_strategy(generation_mode=mode))(call))()
            except Unsatisfiable:
                pass  # no invalid request exists for an operation without parameters or body
            cases += sum(statuses.values()) + len(resets) - before
    return {"cases": cases, "examples_per_operation_and_mode": examples, "statuses": dict(sorted(statuses.items())),
            "5xx": len(fivexx), "connection_resets": len(resets), "non_openai_error_bodies": bad_format,
            "schema_mismatches": len(mismatches), "examples_5xx": fivexx[:5], "examples_resets": resets[:5],
            "examples_mismatches": sorted(set(mismatches))[:5], "valid_request_after": valid_request_ok(url, headers)}


# ---- R1: gRPC fuzz ------------------------------------------------------------------------------

def grpc_fuzz(target: str, n: int = 1000, seed: int = 0) -> dict:
    import grpc

    from mtpserve.grpc_api import mtpserve_pb2 as pb

    rng = random.Random(seed)
    codes: dict[str, int] = {}
    internal, crashes = [], 0
    with grpc.insecure_channel(target) as channel:
        raw_generate = channel.unary_stream("/mtpserve.v1.Generation/Generate", request_serializer=lambda b: b,
                                            response_deserializer=lambda b: b)
        raw_models = channel.unary_unary("/mtpserve.v1.Generation/Models", request_serializer=lambda b: b,
                                         response_deserializer=lambda b: b)
        for i in range(n):
            kind = rng.random()
            if kind < 0.3:  # random bytes
                payload = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
            elif kind < 0.4:  # a valid message with fields of the wrong wire type / truncated
                good = pb.GenerateRequest(text="hello", sampling_params=pb.SamplingParams(max_tokens=2)).SerializeToString()
                payload = good[: rng.randint(0, len(good))] + bytes(rng.randrange(256) for _ in range(rng.randint(0, 8)))
            else:  # well-formed messages with odd values
                sp = pb.SamplingParams(max_tokens=rng.choice([0, 1, 2, 2**31 - 1]),
                                       temperature=rng.choice([-1.0, 0.0, float("nan"), float("inf"), 1.0]),
                                       top_p=rng.choice([0.0, -1.0, 0.5, 2.0, 1.0]), top_k=rng.choice([-5, 0, 1, 2**31 - 1]),
                                       min_p=rng.choice([-1.0, 0.0, 2.0]), stop=rng.choice([[], [""], ["x"] * 50]),
                                       stop_token_ids=rng.choice([[], [2**31 - 1], [0]]),
                                       logprobs=rng.choice([0, 21, 2**31 - 1]))
                req = pb.GenerateRequest(sampling_params=sp, model=rng.choice(["", "nope", "x" * 1000]))
                which = rng.random()
                if which < 0.4:
                    req.text = rng.choice(["", "hello", "x" * 100000, "\x00", "🙂"])
                elif which < 0.8:
                    req.token_ids.ids.extend(rng.choice([[], [5, 6], [2**32 - 1], [0] * 2000, [10**6]]))
                if rng.random() < 0.3:
                    req.chat = True
                if rng.random() < 0.2:
                    req.request_id = rng.choice(["", "dup", "x" * 10000])
                payload = req.SerializeToString()
            try:
                if rng.random() < 0.1:
                    raw_models(payload, timeout=60)
                else:
                    for _ in raw_generate(payload, timeout=60):
                        pass
                codes["OK"] = codes.get("OK", 0) + 1
            except grpc.RpcError as e:
                name = e.code().name
                codes[name] = codes.get(name, 0) + 1
                if e.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                    internal.append(f"{name}: {e.details()} ({payload[:60]!r})")
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    crashes += 1
    return {"messages": n, "codes": dict(sorted(codes.items())), "internal_or_unknown": len(internal),
            "unavailable": crashes, "examples": internal[:5]}


# ---- R2: streaming disconnect storm -------------------------------------------------------------

async def storm(url: str, clients: int = 500, drop: float = 0.3, concurrency: int = 64, seed: int = 0,
                max_tokens: int = 64) -> dict:
    rng = random.Random(seed)
    sem = asyncio.Semaphore(concurrency)
    outcome = {"completed": 0, "dropped": 0, "refused": 0, "errors": 0}

    async def one(client: httpx.AsyncClient, i: int):
        quit_after = rng.randint(0, 6) if rng.random() < drop else None  # after a few events
        body = {"prompt": rng.choice(["hello", "the quick brown fox", "one two three"]), "max_tokens": max_tokens,
                "ignore_eos": True, "stream": True, "temperature": rng.choice([0, 0.8])}
        async with sem:
            try:
                async with client.stream("POST", "/v1/completions", json=body) as r:
                    if r.status_code != 200:  # e.g. 503 from admission control
                        outcome["refused"] += 1
                        return
                    seen = 0
                    async for line in r.aiter_lines():
                        if line.startswith("data: "):
                            seen += 1
                            if quit_after is not None and seen > quit_after:
                                outcome["dropped"] += 1
                                return  # leaving the context closes the connection mid-stream
                    outcome["completed"] += 1
            except httpx.HTTPError:
                outcome["errors"] += 1

    async with httpx.AsyncClient(base_url=url, timeout=300,
                                 limits=httpx.Limits(max_connections=concurrency * 2)) as client:
        await asyncio.gather(*(one(client, i) for i in range(clients)))
    # Bounded wait for the server to settle: nothing running, no KV block in use.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = metric(url, "mtpserve:num_requests_running") + metric(url, "mtpserve:num_requests_waiting")
        kv = metric(url, "mtpserve:kv_cache_usage_perc")
        if running == 0 and kv == 0:
            break
        await asyncio.sleep(0.2)
    return {"clients": clients, "drop_fraction": drop, **outcome, "running_after": running, "kv_usage_after": kv}


# ---- R4: overload burst ------------------------------------------------------------------------

async def overload(url: str, n: int = 1000, max_tokens: int = 32, pid: int | None = None) -> dict:
    """n connections are opened first, then every request is written at once: the latencies are
    the server's, from writing a request to reading its status line (a client that opens 1,000
    connections in Python takes seconds over that itself, which is not the server's doing)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({"prompt": "hello there", "max_tokens": max_tokens, "ignore_eos": True}).encode()
    request = (f"POST /v1/completions HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
               f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body
    statuses: dict[int, int] = {}
    latency: dict[int, list[float]] = {}
    peak_rss = rss_bytes(pid) if pid else 0
    errors = 0
    go, stop_sampling = asyncio.Event(), asyncio.Event()

    async def sample():
        nonlocal peak_rss
        while not stop_sampling.is_set() and pid:
            peak_rss = max(peak_rss, rss_bytes(pid))
            await asyncio.sleep(0.05)

    async def connect():
        try:
            return await asyncio.open_connection(host, int(port))
        except OSError:
            return None

    async def one(connection):
        nonlocal errors
        if connection is None:
            errors += 1
            return
        reader, writer = connection
        try:
            await go.wait()
            t0 = time.monotonic()
            writer.write(request)
            status_line = await reader.readline()
            elapsed = time.monotonic() - t0
            await reader.read()  # the rest of the response, up to the server's close
        except OSError:
            errors += 1
            return
        finally:
            writer.close()
        parts = status_line.split()
        if len(parts) < 2 or not parts[1].isdigit():
            errors += 1
            return
        status = int(parts[1])
        statuses[status] = statuses.get(status, 0) + 1
        latency.setdefault(status, []).append(elapsed)

    sampler = asyncio.ensure_future(sample())
    t0 = time.monotonic()
    connections = await asyncio.gather(*(connect() for _ in range(n)))
    connect_s = time.monotonic() - t0
    t0 = time.monotonic()
    go.set()
    await asyncio.gather(*(one(c) for c in connections))
    wall = time.monotonic() - t0
    stop_sampling.set()
    await sampler

    def quantiles(values: list[float]) -> dict:
        values = sorted(values)
        return {"p50_s": round(values[len(values) // 2], 3), "max_s": round(values[-1], 3)} if values else {}

    return {"requests": n, "statuses": dict(sorted(statuses.items())), "client_errors": errors,
            "connect_s": round(connect_s, 2), "wall_s": round(wall, 2),
            "refused": quantiles(latency.get(503, [])), "admitted": quantiles(latency.get(200, [])),
            "peak_rss_mb": round(peak_rss / 2**20, 1)}


# ---- R3: rank kill ------------------------------------------------------------------------------

def rank_kill(which: str = "worker") -> dict:
    """`mtpserve launch --nnodes 2`: SIGKILL a worker (time to /health 503, to in-flight streams
    failing) or rank 0 (time until every worker is gone)."""
    from mtpserve.launch import free_port_pair

    port = free_port()
    master = free_port_pair()
    log = open(Path(os.environ.get("CHAOS_LOG_DIR", "/tmp")) / f"chaos-launch-{port}.log", "w")
    cmd = [sys.executable, "-m", "mtpserve.cli", "launch", "--nnodes=2", f"--port={port}",
           f"--master_node_addr=127.0.0.1:{master}", "--log_level=info"]
    launcher = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(url, lambda: launcher.poll() is None, 300):
            raise RuntimeError(f"launch did not come up; see {log.name}")
        pids = [int(line.split("pid ")[1]) for line in Path(log.name).read_text().splitlines()
                if "mtpserve.launch: rank" in line and "pid " in line][:2]
        import threading
        ended: dict[int, float] = {}
        started = threading.Barrier(4)

        def stream(i):
            body = {"prompt": "hello", "max_tokens": 1000, "ignore_eos": True, "stream": True}
            try:
                with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as r:
                    first = True
                    for line in r.iter_lines():
                        if first and line.startswith("data: "):
                            first = False
                            started.wait(60)
                        if '"error"' in line:
                            break
            except httpx.HTTPError:
                pass
            ended[i] = time.monotonic()

        threads = [threading.Thread(target=stream, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        started.wait(120)
        victim = pids[1] if which == "worker" else pids[0]
        os.kill(victim, signal.SIGKILL)
        t_kill = time.monotonic()
        result: dict = {"killed": which}
        if which == "worker":
            while time.monotonic() - t_kill < 60:
                try:
                    if httpx.get(url + "/health", timeout=5).status_code == 503:
                        break
                except httpx.HTTPError:
                    break
                time.sleep(0.02)
            result["unhealthy_after_s"] = round(time.monotonic() - t_kill, 3)
            for t in threads:
                t.join(60)
            result["in_flight_failed_after_s"] = round(max(ended.values()) - t_kill, 3) if ended else None
            result["rank0_exit_code"] = None
            while time.monotonic() - t_kill < 60 and launcher.poll() is None:
                time.sleep(0.05)
            result["launch_exit_code"] = launcher.poll()
        else:
            def alive(pid):
                try:
                    os.kill(pid, 0)
                    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1][:1] != "Z"
                except (OSError, ProcessLookupError):
                    return False
            while time.monotonic() - t_kill < 60 and alive(pids[1]):
                time.sleep(0.02)
            result["worker_gone_after_s"] = round(time.monotonic() - t_kill, 3)
            result["worker_alive"] = alive(pids[1])
        return result
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.wait(60)
            except subprocess.TimeoutExpired:
                launcher.kill()
        log.close()


# ---- SIGTERM drain ------------------------------------------------------------------------------

async def _drain_run(server: "Server", clients: int, max_tokens: int) -> dict:
    outcome = {"finished": 0, "ended_with_error": 0, "refused_503": 0, "connection_errors": 0}
    first = asyncio.Event()
    started = 0

    async def one(client):
        nonlocal started
        body = {"prompt": "the quick brown fox", "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
        try:
            async with client.stream("POST", "/v1/completions", json=body) as r:
                if r.status_code == 503:
                    outcome["refused_503"] += 1
                    return
                last = ""
                async for line in r.aiter_lines():
                    if line.startswith("data: {"):
                        last = line
                        started += 1
                        if started >= clients:
                            first.set()
                outcome["ended_with_error" if '"error"' in last else "finished"] += 1
        except httpx.HTTPError:
            outcome["connection_errors"] += 1

    async with httpx.AsyncClient(base_url=server.url, timeout=300) as client:
        tasks = [asyncio.ensure_future(one(client)) for _ in range(clients)]
        try:
            await asyncio.wait_for(first.wait(), 120)
        except asyncio.TimeoutError:
            pass
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        await asyncio.gather(*tasks)
        outcome["streams_done_after_s"] = round(time.monotonic() - t0, 2)
    return outcome


def drain(shutdown_timeout_s: float, clients: int = 20, max_tokens: int = 400) -> dict:
    """SIGTERM to `mtpserve serve` while `clients` streams run: how they end, how long it takes."""
    server = Server(f"--shutdown_timeout={shutdown_timeout_s}", "--max_model_len=2048")
    out = asyncio.run(_drain_run(server, clients, max_tokens))
    t0 = time.monotonic()
    out["exit_code"] = server.stop(timeout_s=shutdown_timeout_s + 60)
    out["shutdown_timeout_s"] = shutdown_timeout_s
    out["exited_after_streams_s"] = round(time.monotonic() - t0, 2)
    return out


# ---- R5: cluster hardening -----------------------------------------------------------------------

def cluster_check() -> dict:
    """A ControlMaster with a token: RPCs without it refused, forged fields refused, state unchanged."""
    import grpc

    from mtpserve.control import ControlMaster
    from mtpserve.control import control_pb2 as pb
    from mtpserve.control import control_pb2_grpc as pb_grpc
    from mtpserve.control.master import TOKEN_METADATA_KEY

    port = free_port()
    master = ControlMaster(world_size=2, token="t0ken").start("127.0.0.1", port)
    refused_without, refused_forged = 0, 0
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = pb_grpc.ControlStub(ch)
            for call, req in (("Register", pb.RegisterRequest(rank=1, world_size=2, pid=1, hostname="h")),
                              ("Ready", pb.ReadyRequest(rank=1, max_blocks=1)), ("Heartbeat", pb.HeartbeatRequest(rank=7))):
                try:
                    getattr(stub, call)(req, timeout=10)
                except grpc.RpcError as e:
                    refused_without += e.code() == grpc.StatusCode.UNAUTHENTICATED
            md = ((TOKEN_METADATA_KEY, "t0ken"),)
            for call, req in (("Heartbeat", pb.HeartbeatRequest(rank=7)), ("Heartbeat", pb.HeartbeatRequest(rank=1)),
                              ("Ready", pb.ReadyRequest(rank=1, max_blocks=0)), ("Ready", pb.ReadyRequest(rank=9, max_blocks=5))):
                try:
                    getattr(stub, call)(req, timeout=10, metadata=md)
                except grpc.RpcError as e:
                    refused_forged += e.code() == grpc.StatusCode.INVALID_ARGUMENT
        return {"refused_without_token": f"{refused_without}/3", "refused_forged": f"{refused_forged}/4",
                "healthy_after": master.health()[0], "state_after": master.steps()}
    finally:
        master.stop(grace_s=0.5)


def listening_sockets(pids: list[int]) -> list[str]:
    """Local addresses the given processes listen on (from `ss -ltnp`)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return sorted({line.split()[3] for line in out.splitlines() if any(f"pid={p}," in line for p in pids)})


# ---- all ----------------------------------------------------------------------------------------

def warm_up(server: Server, clients: int, settled: float = 0.01, max_rounds: int = 5) -> tuple[list, list]:
    """Storms of the same traffic until the idle RSS grows by less than `settled` over a round (at
    least two, at most max_rounds), so that the allocator caches have reached their plateau
    (docs/reliability.md, "Idle RSS"); R2 compares idle RSS after it with idle RSS after the storm.
    Returns the storms' figures and the idle RSS after each (MB)."""
    storms, rss_mb = [], []
    for i in range(max_rounds):
        storms.append(asyncio.run(storm(server.url, clients, seed=100 + i)))
        time.sleep(2)
        rss_mb.append(round(server.rss / 2**20, 1))
        if i >= 1 and rss_mb[-1] <= rss_mb[-2] * (1 + settled):
            break
    return storms, rss_mb


def run_all(short: bool) -> dict:
    scale = dict(http=400, schema=25, grpc=150, storm=40, overload=120, queue=8) if short else \
        dict(http=10000, schema=500, grpc=1000, storm=500, overload=1000, queue=64)
    figures: dict = {"short": short, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                     "machine": f"{os.cpu_count()} CPUs, {os.uname().machine}, {os.uname().release}"}
    server = Server("--max_queue_len=%d" % scale["queue"], grpc=True)
    try:
        figures["idle_rss_start_mb"] = round(server.rss / 2**20, 1)
        figures["http_fuzz"] = asyncio.run(http_fuzz(server.url, scale["http"]))
        figures["schema_fuzz"] = schema_fuzz(server.url, scale["schema"])
        figures["grpc_fuzz"] = grpc_fuzz(f"127.0.0.1:{server.grpc_port}", scale["grpc"])
        warm, warm_rss = warm_up(server, scale["storm"])
        figures["idle_rss_after_warmup_mb"] = warm_rss[-1]
        figures["storm"] = asyncio.run(storm(server.url, scale["storm"]))
        time.sleep(2)
        figures["idle_rss_after_storm_mb"] = round(server.rss / 2**20, 1)
        figures["storm"]["warmup"] = warm
        figures["storm"]["idle_rss_after_each_warmup_round_mb"] = warm_rss
        figures["overload"] = asyncio.run(overload(server.url, scale["overload"], pid=server.proc.pid))
        figures["overload"]["max_queue_len"] = scale["queue"]
        figures["listening"] = listening_sockets([server.proc.pid])
        figures["valid_request_after_all"] = valid_request_ok(server.url)
    finally:
        figures["serve_exit_code"] = server.stop()
    figures["cluster"] = cluster_check()
    if not short:
        for name, run in (("drain_60s", lambda: drain(60.0)), ("drain_1s", lambda: drain(1.0)),
                          ("rank_kill_worker", lambda: rank_kill("worker")),
                          ("rank_kill_master", lambda: rank_kill("master"))):
            try:
                figures[name] = run()
            except Exception as e:  # one scenario's failure is a figure too
                figures[name] = {"failed": f"{type(e).__name__}: {e}"}
    return figures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("http-fuzz"); a.add_argument("--url", required=True); a.add_argument("--n", type=int, default=10000)
    a.add_argument("--concurrency", type=int, default=16)
    sf = sub.add_parser("schema-fuzz"); sf.add_argument("--url", required=True)
    sf.add_argument("--examples", type=int, default=500); sf.add_argument("--api_key")
    g = sub.add_parser("grpc-fuzz"); g.add_argument("--target", required=True); g.add_argument("--n", type=int, default=1000)
    s = sub.add_parser("storm"); s.add_argument("--url", required=True); s.add_argument("--clients", type=int, default=500)
    s.add_argument("--drop", type=float, default=0.3)
    o = sub.add_parser("overload"); o.add_argument("--url", required=True); o.add_argument("--n", type=int, default=1000)
    k = sub.add_parser("rank-kill"); k.add_argument("--which", choices=("worker", "master"), default="worker")
    d = sub.add_parser("drain"); d.add_argument("--shutdown_timeout", type=float, default=30.0)
    al = sub.add_parser("all"); al.add_argument("--short", action="store_true")
    ns = p.parse_args(argv)
    if ns.cmd == "http-fuzz":
        out = asyncio.run(http_fuzz(ns.url, ns.n, ns.concurrency))
    elif ns.cmd == "schema-fuzz":
        out = schema_fuzz(ns.url, ns.examples, ns.api_key)
    elif ns.cmd == "grpc-fuzz":
        out = grpc_fuzz(ns.target, ns.n)
    elif ns.cmd == "storm":
        out = asyncio.run(storm(ns.url, ns.clients, ns.drop))
    elif ns.cmd == "overload":
        out = asyncio.run(overload(ns.url, ns.n))
    elif ns.cmd == "rank-kill":
        out = rank_kill(ns.which)
    elif ns.cmd == "drain":
        out = drain(ns.shutdown_timeout)
    else:
        out = run_all(ns.short)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
