"""mtpserve.bench end to end: against a scripted fake OpenAI-compatible server (SSE parsing, usage, /metrics
deltas, concurrency cap, errors), and against a real `mtpserve serve` on loopback."""
import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
from aiohttp import web  # noqa: E402

from mtpserve.bench.datasets import SampleRequest  # noqa: E402
from mtpserve.bench.runner import BenchConfig, benchmark  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


# ---- a fake server: tokens "w0 w1 ...", one first-token chunk, then chunks of TOKENS_PER_STEP tokens ----------

TOKENS_PER_STEP = 3


class FakeServer:
    def __init__(self):
        self.in_flight = self.max_in_flight = 0
        self.bodies = []
        self.drafts = self.draft_tokens = self.accepted = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/v1/completions", self.generate)
        app.router.add_post("/v1/chat/completions", self.generate)
        return app

    async def models(self, request):
        return web.json_response({"data": [{"id": "fake-model"}]})

    async def metrics(self, request):
        return web.Response(text=(
            f'mtpserve:spec_decode_num_drafts_total{{model_name="f"}} {self.drafts}\n'
            f'mtpserve:spec_decode_num_draft_tokens_total{{model_name="f"}} {self.draft_tokens}\n'
            f'mtpserve:spec_decode_num_accepted_tokens_total{{model_name="f"}} {self.accepted}\n'))

    async def generate(self, request):
        body = await request.json()
        self.bodies.append(body)
        chat = request.path.endswith("chat/completions")
        prompt = body["messages"][0]["content"] if chat else body["prompt"]
        if prompt == "FAIL":
            return web.json_response({"error": {"message": "bad prompt"}}, status=400)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            n = 1 if prompt == "EOS" else body["max_tokens"]
            words = [f"w{i} " for i in range(n)]
            steps = [words[:1]] + [words[i:i + TOKENS_PER_STEP] for i in range(1, n, TOKENS_PER_STEP)]
            if prompt == "EOS":
                steps = []  # the first token is EOS: no text at all, only the finishing chunk

            async def send(payload):
                await resp.write(f"data: {json.dumps(payload)}\n\n".encode())

            def chunk(text, finish=None):
                delta = {"content": text} if text else {}
                choice = {"index": 0, "delta": delta} if chat else {"index": 0, "text": text}
                return {"choices": [{**choice, "finish_reason": finish}], "usage": None}

            await resp.write(b": keep-alive comment\n\n")
            if chat:
                await send({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            for i, step in enumerate(steps):
                await asyncio.sleep(0.01)
                if prompt == "STREAMERR" and i == 1:
                    await send({"error": {"message": "engine died"}})
                    break
                await send(chunk("".join(step)))
                if i:
                    self.drafts += 1
                    self.draft_tokens += TOKENS_PER_STEP - 1
                    self.accepted += len(step) - 1
                if i == 1:
                    await send(chunk(""))  # a chunk without text: not a token arrival
            await send(chunk("", finish="stop" if prompt == "EOS" else "length"))
            await send({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}})
            await resp.write(b"data: [DONE]\n\n")
            return resp
        finally:
            self.in_flight -= 1


async def _with_fake_server(fn):
    fake = FakeServer()
    runner = web.AppRunner(fake.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        return fake, await fn(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_bench_against_a_fake_server(endpoint):
    requests = [SampleRequest(f"prompt {i}", 2, 4 + i) for i in range(6)]
    warmups = [SampleRequest("warm", 1, 7)]

    async def go(base_url):
        cfg = BenchConfig(base_url=base_url + "/v1", endpoint=endpoint, max_concurrency=2, ignore_eos=True,
                          goodput=["ttft:5000"], disable_tqdm=True)
        return await benchmark(cfg, requests, warmups)

    fake, result = asyncio.run(_with_fake_server(go))
    assert fake.max_in_flight <= 2
    body = fake.bodies[-1]
    assert body["model"] == "fake-model" and body["stream"] is True and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True} and body["temperature"] == 0.0
    assert ("messages" in body) == (endpoint == "chat")
    assert result.metrics.completed == 6 and result.metrics.failed == 0
    for r, req in zip(result.records, requests):
        n = req.expected_output_len
        steps = 1 + -(-(n - 1) // TOKENS_PER_STEP)
        assert r.success and r.error == ""
        assert r.usage_completion_tokens == n == r.output_tokens and r.usage_prompt_tokens == 3
        assert r.generated_text == "".join(f"w{i} " for i in range(n))
        assert len(r.chunk_times) == steps and len(r.itl) == steps - 1  # one gap per multi-token chunk
        assert r.finish_reason == "length"
        assert r.ttft > 0 and r.tpot == pytest.approx((r.latency - r.ttft) / (n - 1))
    m = result.metrics
    assert m.total_output == sum(4 + i for i in range(6)) and m.total_input == 18
    assert m.good_requests == 6
    # The client parsed every stream meanwhile; the fake server shares its process, so this counts both.
    assert 0 < result.client_cpu_busy < 2
    # only the timed requests moved the counters between the two scrapes (the warm-up came before)
    steps = [-(-(4 + i - 1) // TOKENS_PER_STEP) for i in range(6)]
    s = result.spec_decode
    assert s["num_drafts"] == sum(steps)
    assert s["num_accepted_tokens"] == sum(4 + i - 1 - steps[i] for i in range(6))  # a step of L tokens: L-1 drafts
    assert s["mean_acceptance_length"] == pytest.approx(1 + s["num_accepted_tokens"] / s["num_drafts"])
    d = result.to_dict()
    assert len(d["records"]) == 6 and d["metrics"]["completed"] == 6 and d["config"]["request_rate"] == "inf"
    json.dumps(d)


def test_bench_records_failures_from_a_fake_server():
    requests = [SampleRequest("FAIL", 1, 4), SampleRequest("STREAMERR", 1, 8), SampleRequest("ok", 1, 5),
                SampleRequest("EOS", 1, 5)]

    async def go(base_url):
        cfg = BenchConfig(base_url=base_url, served_model_name="x", num_warmups=0, request_rate=1000.0,
                          disable_tqdm=True)
        return await benchmark(cfg, requests)

    _, result = asyncio.run(_with_fake_server(go))
    fail, streamerr, ok, eos = result.records
    assert not fail.success and fail.error.startswith("HTTP 400") and "bad prompt" in fail.error
    assert not streamerr.success and "engine died" in streamerr.error
    assert ok.success and ok.output_tokens == 5
    assert eos.success and eos.output_tokens == 1 and eos.generated_text == "" and eos.finish_reason == "stop"
    assert len(eos.chunk_times) == 1 and eos.ttft == eos.latency and eos.tpot is None
    assert (result.metrics.completed, result.metrics.failed) == (2, 2)


def test_warm_up_failure_stops_the_run():
    async def go(base_url):
        cfg = BenchConfig(base_url=base_url, disable_tqdm=True)
        return await benchmark(cfg, [SampleRequest("ok", 1, 2)], [SampleRequest("FAIL", 1, 2)])

    with pytest.raises(RuntimeError, match="warm-up"):
        asyncio.run(_with_fake_server(go))


# ---- a real `mtpserve serve` ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=[0, 2], ids=["no-mtp", "mtp-k2"])
def server(request, tiny_model_dir, tmp_path_factory):
    k = request.param
    port = _free_port()
    log_path = tmp_path_factory.mktemp("serve") / "server.log"
    cmd = [sys.executable, "-m", "mtpserve.cli", "serve", "--model", str(tiny_model_dir), "--dtype", "float32",
           "--block_size", "8", "--max_cache_blocks", "256", "--port", str(port)]
    if k:
        cmd += ["--num_speculative_tokens", str(k), "--speculative_policy", "fixed"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO))
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"mtpserve serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(base_url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mtpserve serve not healthy after 120 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.3)
        yield base_url, k
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_bench_against_mtpserve_serve(server, tiny_model_dir, tmp_path, capsys):
    from mtpserve.cli import main

    base_url, k = server
    out = tmp_path / "result.json"
    rc = main(["bench", "--base-url", base_url, "--tokenizer", str(tiny_model_dir), "--dataset-name", "random",
               "--random-input-len", "32", "--random-output-len", "16", "--random-range-ratio", "0.25",
               "--num-prompts", "8", "--max-concurrency", "4", "--ignore-eos", "--disable-tqdm",
               "--save-result", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "============ Serving Benchmark Result ============" in printed
    assert "Successful requests:                     8" in printed
    assert "Client CPU busy (%):" in printed and "Engine busy (%):" in printed
    assert "Server event loop busy (%):" in printed
    assert "Engine preemptions:                      0" in printed  # 8 short requests fit the cache
    assert "Engine ms per step:" in printed and "in the target forward:" in printed
    result = json.loads(out.read_text())
    assert 0 < result["client_cpu_busy"] < 2
    # The engine stepped for part of the run: 16-token requests, one prefill step each at least.
    engine = result["engine"]
    assert 0 < engine["prompt_steps"] < engine["busy"] <= 1.05, engine
    assert engine["steps"] > 0 and 0 < engine["target_ms"] < engine["step_ms"], engine
    assert 0 < engine["frontend_busy"] <= 1.05, engine
    # The server's own latencies start at a request's arrival in its engine frontend and end before the client reads
    # the chunk: inside the client's.
    metrics = result["metrics"]
    assert 0 < engine["server_ttft_ms"] <= metrics["mean_ttft_ms"], (engine, metrics)
    assert 0 < engine["server_e2el_ms"] <= metrics["mean_e2el_ms"], (engine, metrics)
    assert engine["server_tpot_ms"] > 0 and "Server's own mean TPOT (ms):" in printed
    assert result["metrics"]["completed"] == 8 and result["metrics"]["failed"] == 0
    records = result["records"]
    assert len(records) == 8
    for r in records:
        assert r["success"], r["error"]
        assert r["usage_completion_tokens"] is not None
        assert r["output_tokens"] == r["usage_completion_tokens"] == r["expected_output_len"]
        assert 12 <= r["expected_output_len"] <= 20
        assert r["usage_prompt_tokens"] >= r["prompt_len"]
        assert r["chunk_times"] and r["ttft_ms"] > 0
    assert result["metrics"]["total_output"] == sum(r["expected_output_len"] for r in records)
    spec = result["spec_decode"]  # the server's /metrics counters, scraped around the run
    assert spec is not None and spec["source"] == "mtpserve"
    if k:
        assert spec["num_draft_tokens"] > 0 and 0 <= spec["acceptance_rate"] <= 1
        assert 1 <= spec["mean_acceptance_length"] <= 1 + k
    else:
        assert spec["num_draft_tokens"] == 0 and spec["acceptance_rate"] is None
        assert "Acceptance rate (%):                     N/A" in printed
