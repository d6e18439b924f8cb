"""Issue 17 (reliability under abuse), on real servers on loopback: admission control (503 +
Retry-After, counted in /metrics), --request_timeout, the body-size limit, the early refusal of
prompts that cannot fit, /health staying responsive while a huge prompt is handled, requests that
could never fit the KV cache refused at admission, and the SIGTERM drain of `mtpserve serve`.

Admission control and timeouts use a stand-in for the C++ engine that never produces output, so
that requests stay queued exactly as long as the test wants (no timing)."""
from __future__ import annotations

import json
import logging
import signal
import socket
import threading
import time
from types import SimpleNamespace

import httpx
import openai
import pytest

from servers import assert_sigterm_drains, start_serve, wait_until_healthy, wait_until_idle

from mtpserve.client import Client
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.engine_link import STAT_FIELDS
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer
from mtpserve.tokenizer import Tokenizer


class StuckEngine:
    """The C++ engine's interface, but no request ever gets an output: they stay queued."""

    def __init__(self):
        self.added, self.aborted = [], []
        self.changed = threading.Condition()

    def add_request(self, request_id, prompt, params):
        with self.changed:
            self.added.append(request_id)
            self.changed.notify_all()

    def abort(self, request_id):
        with self.changed:
            self.aborted.append(request_id)
            self.changed.notify_all()

    def get_outputs(self, timeout_s):
        time.sleep(min(timeout_s, 0.05))
        return []

    def error(self):
        return None

    def stats(self):
        spec = SimpleNamespace(drafts=0, draft_tokens=0, accepted_tokens=0, accepted_per_position=[], steps_by_k=[],
                               retired=0)
        # Every stat the engine reports (engine_link.STAT_FIELDS), idle but for the requests waiting.
        return SimpleNamespace(**{**dict.fromkeys(STAT_FIELDS, 0), "waiting": len(self.added) - len(self.aborted)},
                               spec=spec)

    def wait_for(self, predicate, timeout_s=60.0):
        with self.changed:
            assert self.changed.wait_for(predicate, timeout_s), "the condition never held"


@pytest.fixture
def stuck(tiny_model_dir):
    def make(**limits):
        core = SimpleNamespace(engine=StuckEngine(), tokenizer=Tokenizer.from_dir(tiny_model_dir), max_model_len=256,
                               shutdown=lambda: None)
        engine = AsyncEngine(core, **limits)
        server = BackgroundServer(build_app(engine, "m")).start()
        made.append((server, engine))
        return SimpleNamespace(url=server.url, engine=engine, fake=core.engine)

    made = []
    yield make
    for server, engine in made:
        server.stop()
        engine.shutdown()


def post_in_background(url, body, results):
    def run():
        try:
            results.append(httpx.post(url + "/v1/completions", json=body, timeout=120))
        except httpx.HTTPError as e:
            results.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_admission_control_refuses_past_max_queue_len(stuck):
    s = stuck(max_queue_len=2)
    results = []
    threads = [post_in_background(s.url, {"prompt": "hello", "max_tokens": 4}, results) for _ in range(2)]
    s.fake.wait_for(lambda: len(s.fake.added) == 2)
    r = httpx.post(s.url + "/v1/completions", json={"prompt": "one more", "max_tokens": 4}, timeout=30)
    assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
    error = r.json()["error"]
    assert error["code"] == "server_overloaded" and "--max_queue_len 2" in error["message"]
    with openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0) as oai:
        with pytest.raises(openai.InternalServerError):  # the openai client sees a 503
            oai.completions.create(model="m", prompt="x", max_tokens=2)
    # Refused before its body is read: the server answers although the body never comes.
    with socket.create_connection(("127.0.0.1", int(s.url.rsplit(":", 1)[1])), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: 1000\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 503 ")
    metrics = httpx.get(s.url + "/metrics").text
    assert 'mtpserve:request_rejected_total{model_name="m",reason="queue_len"} 3.0' in metrics
    assert httpx.get(s.url + "/health").status_code == 200  # full is not unhealthy
    s.engine.fail_open("test over")
    for t in threads:
        t.join(60)
    assert len(s.fake.added) == 2


def test_admission_control_bounds_queued_prompt_tokens(stuck):
    s = stuck(max_queued_tokens=40)
    results = []
    post_in_background(s.url, {"prompt": [5] * 30, "max_tokens": 4}, results)
    s.fake.wait_for(lambda: len(s.fake.added) == 1)
    r = httpx.post(s.url + "/v1/completions", json={"prompt": [5] * 20, "max_tokens": 4}, timeout=30)
    assert r.status_code == 503 and "--max_queued_tokens 40" in r.json()["error"]["message"]
    s.engine.fail_open("test over")


def test_request_timeout_aborts_and_frees_the_request(stuck):
    s = stuck(request_timeout_s=0.5)
    r = httpx.post(s.url + "/v1/completions", json={"prompt": "hello", "max_tokens": 4}, timeout=60)
    assert r.status_code == 504 and r.json()["error"]["code"] == "request_timeout", r.text
    s.fake.wait_for(lambda: s.fake.aborted == s.fake.added and len(s.fake.added) == 1)  # aborted in the engine
    assert s.engine.num_open_streams == 0 and s.engine.num_queued == 0
    # Streaming: the stream ends with an error event.
    with httpx.stream("POST", s.url + "/v1/completions", json={"prompt": "hi", "stream": True}, timeout=60) as r:
        events = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert "did not finish within 0.5 s" in events[-2] and events[-1] == "data: [DONE]"
    s.fake.wait_for(lambda: len(s.fake.aborted) == 2)


def test_a_client_leaving_before_its_whole_answer_is_no_server_error(stuck, caplog):
    s = stuck()
    with caplog.at_level(logging.ERROR, logger="mtpserve.server"):
        with socket.create_connection(("127.0.0.1", int(s.url.rsplit(":", 1)[1]))) as sock:
            body = json.dumps({"prompt": "hi", "max_tokens": 4}).encode()
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            s.fake.wait_for(lambda: len(s.fake.added) == 1)
        s.fake.wait_for(lambda: s.fake.aborted == s.fake.added)  # the disconnect aborted it in the engine
        # Answered on a later turn of the event loop than the one that ended the request above.
        assert httpx.get(s.url + "/health", timeout=30).status_code == 200
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@pytest.fixture(scope="module")
def small_cache(tiny_model_dir):
    """A real engine whose KV cache holds 4 blocks of 8 tokens; the app takes bodies up to 64 KiB."""
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(tiny_model_dir), dtype="float32", block_size=8,
                                               max_cache_blocks=4, num_speculative_tokens=1)))
    server = BackgroundServer(build_app(engine, "m", max_body_bytes=64 << 10)).start()
    yield SimpleNamespace(url=server.url, engine=engine)
    server.stop()
    engine.shutdown()


def test_requests_that_can_never_fit_the_cache_are_refused_at_admission(small_cache):
    """Issue 17: --max_cache_blocks 1 accepted a 300-token request and failed it with a 500 later."""
    r = httpx.post(small_cache.url + "/v1/completions", json={"prompt": "hello", "max_tokens": 100}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens", r.text
    assert "4 blocks of 8 tokens" in r.json()["error"]["message"]
    # Without max_tokens the default is what fits, so the request runs to the end of the cache.
    r = httpx.post(small_cache.url + "/v1/completions", json={"prompt": "hello", "ignore_eos": True}, timeout=60)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] <= 32
    wait_until_idle(small_cache.engine)


def test_body_size_limit(small_cache):
    big = json.dumps({"prompt": "word " * 20000})  # ~100 KB > 64 KiB
    r = httpx.post(small_cache.url + "/v1/completions", content=big, headers={"content-type": "application/json"},
                   timeout=60)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large", r.text

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b" " * 4096
    r = httpx.post(small_cache.url + "/v1/completions", content=chunks(), headers={"content-type": "application/json"},
                   timeout=60)
    assert r.status_code == 413 and set(r.json()["error"]) == {"message", "type", "param", "code"}, r.text
    assert httpx.get(small_cache.url + "/health").status_code == 200


def test_prompts_that_cannot_fit_are_refused_before_tokenizing(small_cache):
    bound = small_cache.engine.tokenizer.max_chars_per_token
    assert bound is not None  # byte-level BPE, no normalizer
    text = "a" * (small_cache.engine.max_model_len * bound + 1)
    r = httpx.post(small_cache.url + "/v1/completions", json={"prompt": text}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
    assert "characters" in r.json()["error"]["message"]


def test_health_answers_while_a_huge_prompt_is_refused(tiny_model_dir, small_cache):
    """Issue 17: a 30 MB prompt froze /health for 28 s. Now it is refused (413) by the default limit
    and /health keeps answering meanwhile (checked by answers, not by clocks)."""
    app = build_app(small_cache.engine, "m")  # the default 16 MiB limit
    with BackgroundServer(app) as server:
        body = json.dumps({"prompt": "x" * (30 << 20)}).encode()
        result, answers, done = {}, [], threading.Event()

        def send():
            try:
                result["r"] = httpx.post(server.url + "/v1/completions", content=body,
                                         headers={"content-type": "application/json"}, timeout=120)
            finally:
                done.set()
        threading.Thread(target=send, daemon=True).start()
        while not done.is_set():
            answers.append(httpx.get(server.url + "/health", timeout=30).status_code)
        assert result["r"].status_code == 413, result["r"].text
        assert answers and set(answers) == {200}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("timeout_s", [60, 0.5])
def test_sigterm_drain(stuck, timeout_s):
    """SIGTERM drains: /health "draining", 503 for new requests; past --shutdown_timeout the requests
    still running end with a clear error; then the server exits (this engine finishes nothing)."""
    import uvicorn

    from mtpserve.server.frontend import FrontendServer
    from mtpserve.server.serve import bind_socket

    s = stuck()
    sock = bind_socket("127.0.0.1", 0)
    url = "http://127.0.0.1:%d" % sock.getsockname()[1]
    server = FrontendServer(uvicorn.Config(build_app(s.engine, "m"), log_level="warning"), None, s.engine, timeout_s)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    results = []
    waiter = post_in_background(url, {"prompt": "hello", "max_tokens": 4}, results)
    s.fake.wait_for(lambda: len(s.fake.added) == 1)
    server.handle_exit(signal.SIGTERM, None)
    if timeout_s > 1:  # draining: /health says so, new requests get 503, the open one goes on
        h = httpx.get(url + "/health", timeout=10)
        assert h.status_code == 503 and h.json()["status"] == "draining"
        r = httpx.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, timeout=10)
        assert r.status_code == 503 and "shutting down" in r.json()["error"]["message"]
        assert 'reason="draining"} 1.0' in httpx.get(url + "/metrics").text
        assert not results and thread.is_alive()
        s.engine.fail_open("finished")  # the open request ends: the server exits
        waiter.join(60)
    else:
        waiter.join(60)
        r = results[0]
        assert r.status_code == 500 and "shut down before the request finished" in r.json()["error"]["message"], r.text
    thread.join(60)
    assert not thread.is_alive()
    sock.close()


def test_sigterm_lets_running_requests_finish(tiny_model_dir):
    """`mtpserve serve` on SIGTERM: the running stream finishes, then the process exits 0."""
    timeout_s = 60
    port = free_port()
    proc = start_serve("--model", str(tiny_model_dir), "--dtype=float32", "--block_size=8", "--max_cache_blocks=64",
                       f"--port={port}", "--log_level=warning", f"--shutdown_timeout={timeout_s}")
    url = f"http://127.0.0.1:{port}"
    try:
        with Client(url, timeout=10) as c:
            wait_until_healthy(c, proc)
        assert_sigterm_drains(proc, url)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_grpc_admission_control_and_bad_token_ids(stuck):
    import grpc

    from mtpserve.grpc_api import mtpserve_pb2 as pb
    from mtpserve.grpc_api import mtpserve_pb2_grpc as pb_grpc
    from mtpserve.grpc_api.server import BackgroundGrpcServer

    s = stuck(max_queue_len=1)
    with BackgroundGrpcServer(s.engine, "m") as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.GenerationStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Generate(pb.GenerateRequest(token_ids=pb.TokenIds(ids=[5, 100000])), timeout=60))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "100000" in e.value.details()
        first = stub.Generate(pb.GenerateRequest(text="hello"), timeout=60)
        s.fake.wait_for(lambda: len(s.fake.added) == 1)
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Generate(pb.GenerateRequest(text="more"), timeout=60))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "--max_queue_len 1" in e.value.details()
        assert dict(e.value.trailing_metadata())["retry-after"] == "1"
        first.cancel()
        s.fake.wait_for(lambda: len(s.fake.aborted) == 1)


# ---- start-up: bad configs, ports in use ------------------------------------------------------------

def _copy_model(src, dst):
    import shutil
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("name, change, message", [
    ("config.json", lambda raw: [raw], "expected a JSON object, got a JSON list"),
    ("config.json", lambda raw: {**raw, "rope_scaling": [1, 2]}, "rope_scaling must be a JSON object or null"),
    ("tokenizer.json", None, "is not a valid tokenizer file"),
    ("tokenizer_config.json", lambda raw: [raw], "expected a JSON object"),
])
def test_bad_configs_exit_with_one_line(tiny_model_dir, tmp_path, name, change, message):
    model = _copy_model(tiny_model_dir, tmp_path / "model")
    path = model / name
    if change is None:
        path.write_text(path.read_text()[: len(path.read_text()) // 2])  # truncated
    else:
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    proc = start_serve("--model", str(model), "--port=0", "--log_level=warning", "--dtype=float32")
    try:
        out, _ = proc.communicate(timeout=120)  # a config that loads would serve: bounded here
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [line for line in out.splitlines() if line.strip() and not line.startswith("Loading model")]
    assert proc.returncode == 2 and len(lines) == 1, out
    assert lines[0].startswith("mtpserve: error:") and message in lines[0], out


def test_port_in_use_is_found_before_the_model_loads(tmp_path, tiny_model_dir, capsys):
    from mtpserve.cli import main as cli_main

    # A model that would fail to load (config.json only): the port must be checked first.
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert cli_main(["serve", "--model", str(model), f"--port={port}", "--log_level=warning"]) == 2
        err = capsys.readouterr().err
        assert f"cannot serve the HTTP API on 127.0.0.1:{port}" in err and "safetensors" not in err
        assert cli_main(["serve", "--model", str(model), "--port=0", f"--grpc_port={port}",
                         "--log_level=warning"]) == 2
        assert f"cannot serve the gRPC API on 127.0.0.1:{port}" in capsys.readouterr().err


def test_api_key_from_env_or_file(tmp_path, monkeypatch):
    from mtpserve.cli import read_secret

    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    monkeypatch.setenv("MTPSERVE_API_KEY", "from-env")
    assert read_secret(None, None, "MTPSERVE_API_KEY", "API key") == "from-env"
    assert read_secret(None, str(key_file), "MTPSERVE_API_KEY", "API key") == "from-file"
    assert read_secret("flag", str(key_file), "MTPSERVE_API_KEY", "API key") == "flag"
    with pytest.raises(ValueError, match="cannot read the API key file"):
        read_secret(None, str(tmp_path / "none"), "MTPSERVE_API_KEY", "API key")
