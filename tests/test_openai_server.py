"""The OpenAI-compatible HTTP server end to end: a real uvicorn server on loopback (one per module),
driven by the official `openai` client, raw httpx and mtpserve.client; plus `mtpserve serve`."""
import asyncio
import json
import signal
import socket
import time
from types import SimpleNamespace

import httpx
import openai
import pytest

from conftest import write_tiny_model
from servers import ended_state, start_serve, wait_until_healthy, wait_until_idle

from mtpserve import LLM
from mtpserve.cli import main as cli_main
from mtpserve.client import AsyncClient, Client, MtpserveError
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import INLINE_CHARS, AsyncEngine
from mtpserve.server.serve import BackgroundServer

MODEL, KEY, MAX_LEN = "tiny-dsv3", "test-key", 1024
ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=256)
AUTH = {"Authorization": f"Bearer {KEY}"}
PROMPT = "the quick brown fox"
CHAT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    # The shared tiny model with a longer context, so that a long generation reliably outlives a
    # client that disconnects.
    return write_tiny_model(tmp_path_factory.mktemp("tiny_1k"), max_position_embeddings=MAX_LEN)


@pytest.fixture(scope="module")
def served(model_dir):
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(model_dir), **ENGINE)))
    ended = []  # RequestState of every request the server ended, in order
    engine.add_finish_listener(ended.append)
    server = BackgroundServer(build_app(engine, MODEL, api_key=KEY)).start()
    yield SimpleNamespace(url=server.url, engine=engine, ended=ended)
    server.stop()
    engine.shutdown()


@pytest.fixture(scope="module")
def offline(model_dir):
    llm = LLM(str(model_dir), **ENGINE)
    yield llm
    llm.shutdown()


@pytest.fixture(scope="module")
def oai(served):
    with openai.OpenAI(base_url=served.url + "/v1", api_key=KEY, max_retries=0, timeout=60) as client:
        yield client


@pytest.fixture
def http(served):
    with httpx.Client(base_url=served.url, headers=AUTH, timeout=60) as client:
        yield client


def greedy(max_tokens, **kw):
    return SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True, **kw)


def sse_events(text):
    assert text.endswith("data: [DONE]\n\n"), text[-200:]
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    return [json.loads(e[6:]) for e in events[:-1]]


# ---- happy paths ------------------------------------------------------------------------------------

def test_models(oai):
    models = oai.models.list().data
    assert [m.id for m in models] == [MODEL]
    assert oai.models.retrieve(MODEL).id == MODEL


def test_completion_greedy_equals_offline(oai, offline):
    expected = offline.generate(PROMPT, greedy(12))[0]
    out = oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0,
                                 extra_body={"ignore_eos": True})
    assert out.object == "text_completion" and out.model == MODEL
    assert out.choices[0].text == expected.outputs[0].text
    assert out.choices[0].finish_reason == "length"
    assert (out.usage.prompt_tokens, out.usage.completion_tokens, out.usage.total_tokens) == (
        len(expected.prompt_token_ids), 12, len(expected.prompt_token_ids) + 12)
    # The same prompt as token ids, bare and as a one-item batch.
    for prompt in (expected.prompt_token_ids, [expected.prompt_token_ids]):
        again = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0,
                                       extra_body={"ignore_eos": True})
        assert again.choices[0].text == expected.outputs[0].text


def test_chat_greedy_equals_offline(oai, offline):
    expected = offline.chat(CHAT, greedy(10))[0]
    out = oai.chat.completions.create(model=MODEL, messages=CHAT, max_completion_tokens=10, temperature=0,
                                      extra_body={"ignore_eos": True})
    assert out.object == "chat.completion"
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].message.content == expected.outputs[0].text
    assert out.usage.prompt_tokens == len(expected.prompt_token_ids) and out.usage.completion_tokens == 10
    # max_tokens is the older spelling of the same thing.
    old = oai.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=10, temperature=0,
                                      extra_body={"ignore_eos": True})
    assert old.choices[0].message.content == expected.outputs[0].text


def test_long_text_is_tokenized_on_a_thread_to_the_same_ids(served):
    # Text up to INLINE_CHARS is tokenized on the event loop; longer text on the tokenizer threads, the GIL
    # released: the ids and the chat template's text must not depend on which.
    engine, tok = served.engine, served.engine.tokenizer
    text = (PROMPT + " ") * (INLINE_CHARS // len(PROMPT))
    assert len(text) > INLINE_CHARS
    for special in (True, False):
        assert asyncio.run(engine.encode(text, special)) == tok.encode(text, special)
    chat = [{"role": "user", "content": text}]
    assert asyncio.run(engine.run_text_work(len(text), tok.apply_chat_template, chat, True)) == \
        tok.apply_chat_template(chat, True)


def test_default_max_tokens_is_the_rest_of_the_context(oai):
    out = oai.completions.create(model=MODEL, prompt=[5, 6, 7], temperature=0, extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == MAX_LEN - 3 and out.choices[0].finish_reason == "length"


def test_streaming_completion_with_usage(oai, http):
    full = oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, temperature=0,
                                  extra_body={"ignore_eos": True})
    chunks = list(oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=16, temperature=0, stream=True,
                                         stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == full.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 16
    assert chunks[-1].usage.total_tokens == full.usage.total_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert [c.choices[0].finish_reason for c in chunks[:-1]][-1] == "length"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-2])
    # On the wire: SSE events, the last one [DONE]; no usage chunk unless asked for.
    raw = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 5, "stream": True})
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw.text)
    assert all(e["choices"] and "usage" not in e for e in events)


def test_streaming_chat_with_usage(oai):
    full = oai.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=12, temperature=0,
                                       extra_body={"ignore_eos": True})
    chunks = list(oai.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=12, temperature=0, stream=True,
                                              stream_options={"include_usage": True},
                                              extra_body={"ignore_eos": True}))
    # The role rides on the first token (a client timing the first chunk measures the first token).
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content
    assert all(c.choices[0].delta.role is None for c in chunks[1:-1])
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == full.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens


def test_stop_strings(served, oai, offline):
    text = offline.generate(PROMPT, greedy(24))[0].outputs[0].text
    # A stop string from the middle of the greedy text, preferably plain ASCII.
    candidates = [i for i in range(4, len(text) - 2) if text[i:i + 2].isascii() and text[i:i + 2].strip()]
    start = candidates[0] if candidates else len(text) // 2
    stop = text[start:start + 2]
    expected = text[:text.find(stop)]
    for stop_arg in (stop, [stop, "never-appears"]):
        out = oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=24, temperature=0, stop=stop_arg,
                                     extra_body={"ignore_eos": True})
        assert out.choices[0].text == expected and out.choices[0].finish_reason == "stop"
        streamed = list(oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=24, temperature=0,
                                               stop=stop_arg, stream=True, extra_body={"ignore_eos": True}))
        assert "".join(c.choices[0].text for c in streamed) == expected
        assert streamed[-1].choices[0].finish_reason == "stop"
    wait_until_idle(served.engine)  # the stop string aborted the request in the engine


def test_sampling_parameters_are_accepted_and_seeded(oai):
    kw = dict(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0.8, top_p=0.9, seed=1234, presence_penalty=0.5,
              frequency_penalty=0.5, extra_body={"top_k": 20, "ignore_eos": True})
    first, second = oai.completions.create(**kw), oai.completions.create(**kw)
    assert first.choices[0].text == second.choices[0].text and first.usage.completion_tokens == 8


def test_completion_logprobs(oai, http):
    out = oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=6, temperature=0, logprobs=3,
                                 extra_body={"ignore_eos": True})
    lp = out.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 6
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert value <= 0 and 1 <= len(top) <= 4
        assert value == pytest.approx(max(top.values()))  # greedy: the chosen token is the most likely
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    # Streamed, the chunks' logprobs add up to one entry per token.
    raw = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 6, "temperature": 0, "logprobs": 2,
                                             "ignore_eos": True, "stream": True})
    events = sse_events(raw.text)
    assert sum(len(e["choices"][0]["logprobs"]["tokens"]) for e in events) == 6
    assert [t for e in events for t in e["choices"][0]["logprobs"]["tokens"]] == lp.tokens


def test_chat_logprobs(oai):
    out = oai.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=5, temperature=0, logprobs=True,
                                      top_logprobs=2, extra_body={"ignore_eos": True})
    content = out.choices[0].logprobs.content
    assert len(content) == 5
    for item in content:
        assert len(item.top_logprobs) == 2 and item.top_logprobs[0].logprob >= item.top_logprobs[1].logprob
        assert item.token == item.top_logprobs[0].token and item.logprob == pytest.approx(item.top_logprobs[0].logprob)
        assert item.bytes == list(item.token.encode())
    plain = oai.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=3, logprobs=True)
    assert all(item.top_logprobs == [] for item in plain.choices[0].logprobs.content)
    assert oai.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=3).choices[0].logprobs is None
    chunks = list(oai.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=5, temperature=0, logprobs=True,
                                              top_logprobs=1, stream=True, extra_body={"ignore_eos": True}))
    assert sum(len(c.choices[0].logprobs.content) for c in chunks if c.choices[0].logprobs) == 5


# ---- errors ---------------------------------------------------------------------------------------

def assert_openai_error(response, status):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


@pytest.mark.parametrize("body, status, param", [
    ("{not json", 400, None),  # not JSON: 400, as OpenAI answers
    ('{"prompt": [[-1, 5, 1000000000000]]}', 400, "prompt"),  # ids outside the vocabulary (was a 500)
    ('{"prompt": [5, 99999999999999999999999]}', 400, "prompt"),  # beyond int64
    ('{"prompt": "x", "top_k": 99999999999999999999}', 400, "top_k"),  # beyond int64 (was a 500)
    ('{"prompt": "x", "stop_token_ids": [99999999999999999999]}', 400, "stop_token_ids"),
    ('{"prompt": "a\\ud800b"}', 400, "prompt"),  # a lone surrogate (was a 500)
    ('{"prompt": "x", "stop": ["\\udfff"]}', 400, "stop"),
    ('{"prompt": "x", "max_tokens": "ten"}', 422, "max_tokens"),
    ('{"prompt": 5}', 422, "prompt"),
    ('{"max_tokens": 3}', 422, "prompt"),
    ('{"prompt": "x", "stream": "yes"}', 422, "stream"),
    ('{"prompt": "x", "max_tokens": -1}', 400, "max_tokens"),
    ('{"prompt": "x", "max_tokens": 0}', 400, "max_tokens"),
    ('{"prompt": "x", "temperature": -0.5}', 400, "temperature"),
    ('{"prompt": "x", "top_p": 0}', 400, "top_p"),
    ('{"prompt": "x", "n": 0}', 400, "n"),
    ('{"prompt": "x", "n": 65}', 400, "n"),
    ('{"prompt": "x", "n": 3, "best_of": 2}', 400, "best_of"),
    ('{"prompt": "x", "best_of": 2, "stream": true}', 400, "best_of"),
    ('{"prompt": "x", "logprobs": 21}', 400, "logprobs"),
    ('{"prompt": "x", "stop": ""}', 400, "stop"),
    ('{"prompt": "x", "stream_options": {"include_usage": true}}', 400, "stream_options"),
    ('{"prompt": ""}', 400, "prompt"),
    ('{"prompt": ["a", ""]}', 400, "prompt"),
    ('{"prompt": [[5, 6], []]}', 400, "prompt"),
    ('{"prompt": [1, 2, 100000]}', 400, "prompt"),
    ('{"prompt": "x", "max_tokens": 5000}', 400, "max_tokens"),
    ('{"prompt": "x", "model": "gpt-4"}', 404, "model"),
])
def test_bad_completion_requests(served, http, body, status, param):
    response = http.post("/v1/completions", content=body, headers={"content-type": "application/json"})
    assert assert_openai_error(response, status)["param"] == param


@pytest.mark.parametrize("body, status, param", [
    ({"messages": "hello"}, 422, "messages"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages"),
    ({"messages": []}, 400, "messages"),
    ({"messages": CHAT, "top_logprobs": 2}, 400, "top_logprobs"),
    ({"messages": CHAT, "max_completion_tokens": -3}, 400, "max_completion_tokens"),
    ({"messages": CHAT, "max_tokens": -3}, 400, "max_tokens"),
    ({"messages": CHAT, "tools": [{"type": "function"}]}, 400, "tools"),
    ({"messages": CHAT, "logprobs": 1}, 422, "logprobs"),
])
def test_bad_chat_requests(http, body, status, param):
    assert assert_openai_error(http.post("/v1/chat/completions", json=body), status)["param"] == param


def test_bad_token_ids_are_named(http):
    error = assert_openai_error(http.post("/v1/completions", json={"prompt": [[5, -1, 1000000000000]]}), 400)
    assert "-1" in error["message"] and "vocabulary [0, 512)" in error["message"]
    error = assert_openai_error(http.post("/v1/completions", json={"prompt": [5, 512]}), 400)
    assert "512" in error["message"] and error["code"] == "invalid_token_id"
    chat = '{"messages": [{"role": "user", "content": "hi \\ud83d there"}]}'
    error = assert_openai_error(http.post("/v1/chat/completions", content=chat,
                                          headers={"content-type": "application/json"}), 400)
    assert error["param"] == "messages" and "surrogate" in error["message"]


def test_unexpected_errors_show_no_internals(served):
    """The catch-all 500 names an incident id, not the exception (pybind signatures, addresses)."""
    app = build_app(served.engine, MODEL)

    @app.get("/boom")
    async def boom():
        raise TypeError("add_request(): incompatible function arguments. (self: mtpserve._C.Engine) "
                        "<object at 0x7f00deadbeef>")

    with BackgroundServer(app) as server:
        error = assert_openai_error(httpx.get(server.url + "/boom"), 500)
        assert "incident" in error["message"] and "0x7f" not in error["message"] and "_C" not in error["message"]
        # The keep-alive connection survives the 500 (uvicorn used to close it, and a client that
        # reused it for its next request saw a connection reset).
        with socket.create_connection((server.host, server.port), timeout=30) as sock:
            reader = sock.makefile("rb")
            for path, status in (("/boom", b"500"), ("/health", b"200")):
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                assert reader.readline().split()[1] == status
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                    assert not line.lower().startswith(b"connection: close"), line
                reader.read(length)


def test_models_do_not_reveal_paths(model_dir):
    from mtpserve.server.serve import model_root
    assert model_root(str(model_dir)) == model_dir.name and "/" not in model_root(str(model_dir))


def test_prompt_too_long(oai, http):
    error = assert_openai_error(http.post("/v1/completions", json={"prompt": [5] * MAX_LEN}), 400)
    assert error["code"] == "context_length_exceeded" and str(MAX_LEN) in error["message"]
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "word " * 2000}])


def test_openai_client_sees_typed_errors(oai):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        oai.completions.create(model="no-such-model", prompt="x")
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        oai.completions.create(model=MODEL, prompt="x", max_tokens=-1)
    with pytest.raises(openai.UnprocessableEntityError):
        oai.completions.create(model=MODEL, prompt="x", max_tokens="many")


def test_api_key(served):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        for method, path in (("GET", "/v1/models"), ("POST", "/v1/completions"), ("GET", "/metrics"),
                             ("GET", "/nope")):
            error = assert_openai_error(httpx.request(method, served.url + path, headers=headers, json={}), 401)
            assert error["code"] == "invalid_api_key"
    assert httpx.get(served.url + "/health").json() == {"status": "ok"}
    with openai.OpenAI(base_url=served.url + "/v1", api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()


def test_unknown_route_and_method(http):
    assert_openai_error(http.get("/v1/nothing"), 404)
    assert_openai_error(http.get("/v1/completions"), 405)


def test_server_keeps_serving_after_bad_requests(served, oai, http):
    for body in ("{", '{"prompt": 1}', '{"prompt": "x", "max_tokens": -5}'):
        http.post("/v1/completions", content=body, headers={"content-type": "application/json"})
    out = oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3)
    assert out.usage.completion_tokens <= 3 and out.choices[0].finish_reason in ("stop", "length")
    assert http.get("/health").status_code == 200
    wait_until_idle(served.engine)


# ---- disconnects ----------------------------------------------------------------------------------

@pytest.mark.parametrize("route, body", [("/v1/completions", {"prompt": PROMPT}),
                                         ("/v1/chat/completions", {"messages": CHAT})])
def test_client_disconnect_mid_stream_frees_blocks(served, route, body):
    body = {**body, "max_tokens": 1000, "ignore_eos": True, "stream": True}
    with httpx.Client(base_url=served.url, headers=AUTH, timeout=30) as client:
        with client.stream("POST", route, json=body) as response:
            first = next(line for line in response.iter_lines() if line.startswith("data: "))
    request_id = json.loads(first[6:])["id"]
    state = ended_state(served, request_id)
    assert state.finish_reason is None and len(state.token_ids) < 1000  # aborted, not run to the end
    wait_until_idle(served.engine)


def test_client_disconnect_before_a_full_response_frees_blocks(served):
    before = len(served.ended)
    with httpx.Client(base_url=served.url, headers=AUTH, timeout=httpx.Timeout(30, read=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 1000, "ignore_eos": True})
    deadline = time.monotonic() + 10
    while len(served.ended) == before:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert served.ended[before].finish_reason is None  # aborted
    wait_until_idle(served.engine)


def test_unhealthy_server_answers_503(served):
    app = build_app(served.engine, MODEL, health=lambda: (False, "rank 1 stopped heartbeating"))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        response = client.get("/health")
        assert response.status_code == 503 and response.json()["status"] == "unhealthy"
        assert "rank 1" in response.json()["error"]["message"]
        error = assert_openai_error(client.post("/v1/completions", json={"prompt": PROMPT}), 503)
        assert "rank 1" in error["message"]
        assert Client(server.url).health() is False


# ---- AsyncEngine ----------------------------------------------------------------------------------

def test_async_engine_holds_back_text_that_may_become_a_stop_string(served, offline):
    engine = served.engine
    text = offline.generate(PROMPT, greedy(40))[0].outputs[0].text
    i = len(text) // 2
    stop = text[i:i + 3] + "\x00"  # its first three characters appear, the whole never does
    params = greedy(40, stop=[stop])

    async def run():
        pieces = []
        async for new_text, token_ids, finished, state in engine.generate(engine.tokenizer.encode(PROMPT), params):
            pieces.append(new_text)
            if not finished:  # what was streamed never ends in something that could still become the stop
                shown = "".join(pieces)
                assert not any(stop.startswith(shown[-n:]) for n in range(1, min(len(shown), 3) + 1))
        return pieces, state

    pieces, state = asyncio.run(run())
    assert "".join(pieces) == text == state.text and state.finish_reason == "length"
    wait_until_idle(engine)


def test_async_engine_cancelled_task_aborts_its_request(served):
    engine = served.engine

    async def run():
        got = []

        async def consume():
            async for delta in engine.generate([5, 6, 7], greedy(1000)):
                got.append(delta)

        task = asyncio.create_task(consume())
        while not got:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return got[-1].state

    state = asyncio.run(run())
    assert state.finish_reason is None and len(state.token_ids) < 1000
    wait_until_idle(engine)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        asyncio.run(_add(engine, [10**6]))


async def _add(engine, prompt):
    engine.add_request(prompt, greedy(1))


# ---- mtpserve.client ------------------------------------------------------------------------------

def test_python_client_sync(served, offline):
    expected = offline.generate(PROMPT, greedy(8))[0].outputs[0].text
    with Client(served.url, api_key=KEY, timeout=30) as c:
        assert c.health() is True
        assert [m.id for m in c.models()] == [MODEL] and c.models()[0].max_model_len == MAX_LEN
        out = c.completions(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
        assert out.text == expected and out.usage.completion_tokens == 8 and out.choices[0].finish_reason == "length"
        chunks = list(c.completions_stream(PROMPT, max_tokens=8, temperature=0, ignore_eos=True, include_usage=True))
        assert "".join(ch.text for ch in chunks) == expected and chunks[-1].usage.completion_tokens == 8
        chat = c.chat(CHAT, max_tokens=4, temperature=0, ignore_eos=True)
        streamed = list(c.chat_stream(CHAT, max_tokens=4, temperature=0, ignore_eos=True))
        assert "".join(ch.content for ch in streamed) == chat.content and chat.usage.completion_tokens == 4
        assert streamed[0].choices[0].delta.role == "assistant"
        assert "mtpserve:generation_tokens_total" in c.metrics()
        with pytest.raises(MtpserveError) as e:
            c.completions(PROMPT, model="nope")
        assert e.value.status == 404 and "does not exist" in e.value.message
        with pytest.raises(MtpserveError) as e:
            list(c.completions_stream(PROMPT, max_tokens=-1))
        assert e.value.status == 400 and e.value.param == "max_tokens"
    with Client(served.url, timeout=30) as anonymous:
        assert anonymous.health() is True  # /health needs no key
        with pytest.raises(MtpserveError) as e:
            anonymous.models()
        assert e.value.status == 401
    with Client("http://127.0.0.1:9", timeout=5) as nowhere:
        with pytest.raises(MtpserveError, match="cannot reach") as e:
            nowhere.models()
        assert e.value.status is None


def test_python_client_async(served):
    async def run():
        async with AsyncClient(served.url + "/v1", api_key=KEY, model=MODEL, timeout=30) as c:
            assert await c.health() and [m.id for m in await c.models()] == [MODEL]
            one, two = await asyncio.gather(c.completions(PROMPT, max_tokens=6, temperature=0, ignore_eos=True),
                                            c.chat(CHAT, max_tokens=6, temperature=0, ignore_eos=True))
            text = "".join([ch.text async for ch in c.completions_stream(PROMPT, max_tokens=6, temperature=0,
                                                                         ignore_eos=True)])
            content = "".join([ch.content async for ch in c.chat_stream(CHAT, max_tokens=6, temperature=0,
                                                                        ignore_eos=True)])
            assert (text, content) == (one.text, two.content)

            async def streamed(prompt):
                return "".join([ch.text async for ch in c.completions_stream(prompt, max_tokens=10, temperature=0,
                                                                             ignore_eos=True)])

            prompts = [[i, i + 1, i + 2] for i in range(5, 11)]
            together = await asyncio.gather(*(streamed(p) for p in prompts))
            assert together == [(await c.completions(p, max_tokens=10, temperature=0, ignore_eos=True)).text
                                for p in prompts]
            assert "mtpserve:prompt_tokens_total" in await c.metrics()
            with pytest.raises(MtpserveError) as e:
                await c.chat([{"role": "user", "content": "x"}], n=0)
            assert e.value.status == 400

    asyncio.run(run())


# ---- mtpserve serve -----------------------------------------------------------------------------

@pytest.mark.parametrize("flags, message", [
    (["--nnodes=2"], "--master_node_addr is required with --nnodes > 1"),
    (["--nnodes=2", "--master_node_addr=localhost"], "expected host:port"),
    (["--nnodes", "1", "--node_rank=1"], "--node_rank=1"),
    (["--nnodes=0"], "--nnodes must be >= 1"),
    (["--ep_size", "2"], "--ep_size must be 1 or --nnodes (1)"),
    (["--dp_size=4"], "--dp_size=4 does not divide --nnodes 1"),
    (["--enable_mla=false"], "MLA"),
    (["--model", "/no/such/dir"], "no config.json"),
])
def test_serve_refuses_what_it_cannot_run(capsys, flags, message):
    assert cli_main(["serve", *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--no_such_flag=1"], ["--port", "eighty"], ["--enable_mla=maybe"],
                                   ["--log_level", "loud"]])
def test_serve_rejects_bad_flags(capsys, flags):
    with pytest.raises(SystemExit) as e:
        cli_main(["serve", *flags])
    assert e.value.code != 0


def test_mtpserve_serve_process(model_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # xLLM-style flags, both spellings, including the single-rank parallelism flags.
    proc = start_serve("--model", str(model_dir), "--dtype=float32",
           "--block_size", "8", "--max_cache_blocks=64", f"--port={port}", "--served_model_name", "cli-model",
           "--api_key=k", "--nnodes=1", "--node_rank", "0", "--ep_size=1", "--dp_size", "1", "--enable_mla=true",
           "--enable_prefix_cache=false", "--num_speculative_tokens", "1", "--log_level=warning")
    try:
        with Client(f"http://127.0.0.1:{port}", api_key="k", timeout=10) as c:
            wait_until_healthy(c, proc)
            assert [m.id for m in c.models()] == ["cli-model"]
            card = httpx.get(f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": "Bearer k"}).json()
            assert card["data"][0]["root"] == model_dir.name  # the name, not this machine's path
            assert c.completions(PROMPT, max_tokens=4, temperature=0, ignore_eos=True).usage.completion_tokens == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=20) == 0, proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
