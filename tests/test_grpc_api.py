"""The public gRPC API end to end: a real grpc.aio server on loopback over an AsyncEngine running
MTP (num_speculative_tokens=1), driven by the raw generated stubs, the standard grpc.health.v1
stub and mtpserve.grpc_client; `mtpserve serve --grpc_port`; and the committed stubs being what
scripts/gen_proto.sh generates."""
import asyncio
import importlib.metadata
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import write_tiny_model
from servers import ended_state, start_serve, wait_until_healthy, wait_until_idle

from mtpserve import LLM
from mtpserve.client import Client, MtpserveError
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.grpc_api import mtpserve_pb2 as pb
from mtpserve.grpc_api import mtpserve_pb2_grpc as pb_grpc
from mtpserve.grpc_api.server import BackgroundGrpcServer
from mtpserve.grpc_client import AsyncGrpcClient, GrpcClient
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.async_engine import AsyncEngine

ROOT = Path(__file__).resolve().parents[1]
MODEL, MAX_LEN = "tiny-grpc", 2048
ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=300)
PROMPT = "the quick brown fox"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    # A long context, so that a long generation reliably outlives a client that cancels it.
    return write_tiny_model(tmp_path_factory.mktemp("tiny_grpc"), max_position_embeddings=MAX_LEN)


@pytest.fixture(scope="module")
def served(model_dir):
    # The fixed policy: every decode step carries a draft, so the per-request MTP counters always move.
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(model_dir), num_speculative_tokens=1,
                                               speculative_policy="fixed", **ENGINE)))
    ended = []  # RequestState of every request the server ended, in order
    engine.add_finish_listener(ended.append)
    server = BackgroundGrpcServer(engine, MODEL, model_root=str(model_dir)).start()
    channel = grpc.insecure_channel(server.target)
    yield SimpleNamespace(target=server.target, engine=engine, ended=ended, channel=channel,
                          stub=pb_grpc.GenerationStub(channel))
    channel.close()
    server.stop()
    engine.shutdown()


@pytest.fixture(scope="module")
def offline(model_dir):
    llm = LLM(str(model_dir), **ENGINE)  # no MTP: greedy MTP output must equal it token for token
    yield llm
    llm.shutdown()


@pytest.fixture
def client(served):
    with GrpcClient(served.target, timeout=30) as c:
        yield c


def greedy_request(prompt, max_tokens, **kw):
    request = pb.GenerateRequest(sampling_params=pb.SamplingParams(temperature=0, max_tokens=max_tokens,
                                                                   ignore_eos=True, **kw))
    if isinstance(prompt, str):
        request.text = prompt
    else:
        request.token_ids.ids.extend(prompt)
    return request


def rpc_error(fn) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        fn()
    return e.value


# ---- the raw service ------------------------------------------------------------------------------

def test_streaming_generate_equals_offline_greedy(served, offline):
    expected = offline.generate(PROMPT, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True))[0]
    responses = list(served.stub.Generate(greedy_request(PROMPT, 24), timeout=30))
    assert len(responses) > 1 and all(r.request_id == responses[0].request_id for r in responses)
    assert [t for r in responses for t in r.token_ids] == expected.outputs[0].token_ids
    assert "".join(r.text for r in responses) == expected.outputs[0].text
    assert [r.finished for r in responses] == [False] * (len(responses) - 1) + [True]
    last = responses[-1]
    assert last.finish_reason == "length" and last.WhichOneof("stop_reason") is None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (
        len(expected.prompt_token_ids), 24, len(expected.prompt_token_ids) + 24)
    assert not any(r.HasField("usage") for r in responses[:-1])
    # The same prompt as token ids.
    again = list(served.stub.Generate(greedy_request(expected.prompt_token_ids, 24), timeout=30))
    assert [t for r in again for t in r.token_ids] == expected.outputs[0].token_ids


def test_chat_prompt_equals_offline_chat(served, offline):
    messages = [{"role": "user", "content": "hello there"}]
    expected = offline.chat(messages, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))[0]
    request = greedy_request("hello there", 8)
    request.chat = True
    responses = list(served.stub.Generate(request, timeout=30))
    assert [t for r in responses for t in r.token_ids] == expected.outputs[0].token_ids
    assert responses[-1].usage.prompt_tokens == len(expected.prompt_token_ids)


def test_mtp_counters_arrive_cumulative(served):
    responses = list(served.stub.Generate(greedy_request([5, 6, 7, 8], 16), timeout=30))
    drafts = [r.num_drafts for r in responses]
    assert drafts == sorted(drafts) and drafts[-1] > 0  # cumulative per request, MTP is on
    last = responses[-1]
    assert last.num_draft_tokens == last.num_drafts  # k = 1
    assert 0 <= last.num_accepted_tokens <= last.num_drafts
    assert list(last.accepted_per_position) == [last.num_accepted_tokens]
    # Each verify step emits accepted + 1 tokens after the prefill's first token.
    assert last.num_drafts + last.num_accepted_tokens <= 16 - 1


def test_accepted_counters_move_with_forced_drafts(served):
    """The random tiny model's MTP layer rarely guesses right, so the engine's test hook feeds it
    the known greedy continuation as drafts: every draft is then accepted."""
    prompt = [9, 10, 11, 12]
    plain = list(served.stub.Generate(greedy_request(prompt, 16), timeout=30))
    tokens = [t for r in plain for t in r.token_ids]
    served.engine.engine.override_drafts("forced-grpc", tokens)
    request = greedy_request(prompt, 16)
    request.request_id = "forced-grpc"
    forced = list(served.stub.Generate(request, timeout=30))
    assert [t for r in forced for t in r.token_ids] == tokens
    assert all(r.request_id == "forced-grpc" for r in forced)
    last = forced[-1]
    assert last.num_drafts > 0 and last.num_accepted_tokens == last.num_drafts
    assert list(last.accepted_per_position) == [last.num_accepted_tokens]
    assert last.num_drafts + last.num_accepted_tokens <= 16 - 1
    assert len(forced) < len(plain)  # two tokens per step arrive together


def test_logprobs_stop_strings_and_stop_tokens(served, offline):
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True, logprobs=2)
    expected = offline.generate([5, 6, 7], params)[0].outputs[0]
    responses = list(served.stub.Generate(greedy_request([5, 6, 7], 6, logprobs=2), timeout=30))
    lps = [lp for r in responses for lp in r.logprobs]
    assert [lp.token_id for lp in lps] == expected.token_ids
    for lp, entry in zip(lps, expected.logprobs):
        assert lp.logprob == pytest.approx(entry[lp.token_id].logprob, abs=1e-5)
        assert [t.rank for t in lp.top_logprobs] == [1, 2]
        assert lp.top_logprobs[0].logprob >= lp.top_logprobs[1].logprob
    # A stop token from the middle of the greedy continuation.
    stop_token = expected.token_ids[3]
    cut = expected.token_ids.index(stop_token)
    responses = list(served.stub.Generate(greedy_request([5, 6, 7], 6, stop_token_ids=[stop_token]), timeout=30))
    assert [t for r in responses for t in r.token_ids] == expected.token_ids[:cut + 1]
    assert responses[-1].finish_reason == "stop" and responses[-1].stop_token_id == stop_token
    # A stop string (from the plain greedy text of a prompt whose text is printable enough).
    text = offline.generate(PROMPT, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True))[0].outputs[0].text
    candidates = [i for i in range(4, len(text) - 2) if text[i:i + 2].isascii() and text[i:i + 2].strip()]
    start = candidates[0] if candidates else len(text) // 2
    stop = text[start:start + 2]
    responses = list(served.stub.Generate(greedy_request(PROMPT, 24, stop=[stop]), timeout=30))
    assert "".join(r.text for r in responses) == text[:text.find(stop)]
    assert responses[-1].finish_reason == "stop" and responses[-1].stop_string == stop
    wait_until_idle(served.engine)  # the stop string aborted the request in the engine


def test_health_reports_serving_through_the_standard_stub(served):
    health = health_pb2_grpc.HealthStub(served.channel)
    for service in ("", "mtpserve.v1.Generation"):
        assert health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status == \
            health_pb2.HealthCheckResponse.SERVING
    error = rpc_error(lambda: health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()


def test_models(served, model_dir):
    response = served.stub.Models(pb.ModelsRequest(), timeout=10)
    assert [m.id for m in response.models] == [MODEL]
    card = response.models[0]
    assert (card.max_model_len, card.num_speculative_tokens, card.root) == (MAX_LEN, 1, str(model_dir))


@pytest.mark.parametrize("change, code, words", [
    (dict(model="nope"), grpc.StatusCode.NOT_FOUND, "does not exist"),
    (dict(prompt=None), grpc.StatusCode.INVALID_ARGUMENT, "prompt"),
    (dict(prompt=[]), grpc.StatusCode.INVALID_ARGUMENT, "empty"),
    (dict(prompt=[5, 100000]), grpc.StatusCode.INVALID_ARGUMENT, "100000"),
    (dict(prompt=list(range(5, 5 + MAX_LEN))), grpc.StatusCode.INVALID_ARGUMENT, "maximum context length"),
    (dict(max_tokens=MAX_LEN), grpc.StatusCode.INVALID_ARGUMENT, "maximum context length"),
    (dict(max_tokens=0), grpc.StatusCode.INVALID_ARGUMENT, "max_tokens"),
    (dict(top_p=0.0), grpc.StatusCode.INVALID_ARGUMENT, "top_p"),
    (dict(temperature=-1.0), grpc.StatusCode.INVALID_ARGUMENT, "temperature"),
    (dict(logprobs=50), grpc.StatusCode.INVALID_ARGUMENT, "logprobs"),
    (dict(presence_penalty=3.0), grpc.StatusCode.INVALID_ARGUMENT, "presence_penalty"),
    (dict(stop=[""]), grpc.StatusCode.INVALID_ARGUMENT, "stop"),
    (dict(chat_ids=True), grpc.StatusCode.INVALID_ARGUMENT, "chat"),
    (dict(request_id=""), grpc.StatusCode.INVALID_ARGUMENT, "request_id"),
])
def test_bad_requests_get_the_right_status(served, change, code, words):
    request = greedy_request([5, 6, 7], 4)
    for name, value in change.items():
        if name == "model":
            request.model = value
        elif name == "prompt":
            request.ClearField("token_ids")
            if value is not None:
                request.token_ids.SetInParent()
                request.token_ids.ids.extend(value)
        elif name == "chat_ids":
            request.chat = True
        elif name == "request_id":
            request.request_id = value
        elif name == "stop":
            request.sampling_params.stop.extend(value)
        else:
            setattr(request.sampling_params, name, value)
    error = rpc_error(lambda: list(served.stub.Generate(request, timeout=10)))
    assert error.code() == code and words in error.details(), error.details()


def test_request_id_in_use_and_the_server_keeps_serving(served, offline):
    request = greedy_request([5, 6], 1500)
    request.request_id = "busy"
    first = served.stub.Generate(request, timeout=30)
    next(first)  # "busy" is running now
    error = rpc_error(lambda: list(served.stub.Generate(request, timeout=10)))
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS and "busy" in error.details()
    first.cancel()
    wait_until_idle(served.engine)
    # Every refusal above left the server serving, and it still answers correctly.
    expected = offline.generate([5, 6, 7], SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))[0]
    again = list(served.stub.Generate(greedy_request([5, 6, 7], 6), timeout=30))
    assert [t for r in again for t in r.token_ids] == expected.outputs[0].token_ids


def test_cancelling_a_stream_frees_its_kv_blocks(served):
    request = greedy_request([5, 6, 7], MAX_LEN - 3)
    call = served.stub.Generate(request, timeout=30)
    first = next(call)
    next(call)
    assert served.engine.stats().kv_usage > 0
    call.cancel()
    state = ended_state(served, first.request_id)
    assert state.finish_reason is None and len(state.token_ids) < MAX_LEN - 3  # aborted, not finished
    wait_until_idle(served.engine)


def test_deadline_aborts_the_request(served):
    with GrpcClient(served.target, timeout=0.3) as c:
        with pytest.raises(MtpserveError) as e:
            c.generate([5, 6, 7], max_tokens=MAX_LEN - 3, temperature=0, ignore_eos=True, request_id="deadline")
    assert e.value.status == grpc.StatusCode.DEADLINE_EXCEEDED and "timed out" in e.value.message
    assert ended_state(served, "deadline").finish_reason is None  # aborted on the server
    wait_until_idle(served.engine)


def test_unhealthy_server_is_not_serving_and_unavailable(served):
    with BackgroundGrpcServer(served.engine, MODEL, health=lambda: (False, "rank 1 stopped heartbeating")) as bad, \
            GrpcClient(bad.target, timeout=10) as c:
        assert c.health() is False and c.health("mtpserve.v1.Generation") is False
        with pytest.raises(MtpserveError) as e:
            c.generate([5, 6, 7], max_tokens=2)
        assert e.value.status == grpc.StatusCode.UNAVAILABLE and "rank 1 stopped heartbeating" in e.value.message
        assert [m.id for m in c.models()] == [MODEL]


def test_api_key(served):
    with BackgroundGrpcServer(served.engine, MODEL, api_key="sekrit") as keyed:
        with GrpcClient(keyed.target, timeout=10) as anonymous:
            assert anonymous.health() is True  # Health is open
            for call in (anonymous.models, lambda: anonymous.generate([5, 6], max_tokens=2)):
                with pytest.raises(MtpserveError) as e:
                    call()
                assert e.value.status == grpc.StatusCode.UNAUTHENTICATED and "API key" in e.value.message
        with GrpcClient(keyed.target, api_key="wrong", timeout=10) as wrong:
            with pytest.raises(MtpserveError, match="incorrect API key"):
                wrong.models()
        with GrpcClient(keyed.target, api_key="sekrit", timeout=10) as ok:
            assert ok.generate([5, 6], max_tokens=2, ignore_eos=True).usage.completion_tokens == 2


# ---- mtpserve.grpc_client -------------------------------------------------------------------------

def test_sync_client(served, client, offline):
    expected = offline.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True))[0].outputs[0]
    assert client.health() is True
    models = client.models()
    assert [m.id for m in models] == [MODEL] and models[0].max_model_len == MAX_LEN
    assert models[0].extra["num_speculative_tokens"] == 1
    out = client.generate(PROMPT, max_tokens=12, temperature=0, ignore_eos=True)
    assert (out.text, out.token_ids, out.finish_reason) == (expected.text, expected.token_ids, "length")
    assert out.usage.completion_tokens == 12 and out.usage.total_tokens == out.usage.prompt_tokens + 12
    assert out.spec.num_drafts > 0 and out.spec.acceptance_rate is not None and out.logprobs is None
    chunks = list(client.generate_stream(PROMPT, max_tokens=12, temperature=0, ignore_eos=True))
    assert "".join(c.text for c in chunks) == expected.text and chunks[-1].finished
    assert chunks[-1].usage.completion_tokens == 12 and all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].spec == out.spec
    with_lp = client.generate([5, 6, 7], max_tokens=3, temperature=0, ignore_eos=True, logprobs=1, stop="zzz")
    assert [lp.token_id for lp in with_lp.logprobs] == with_lp.token_ids and len(with_lp.logprobs[0].top_logprobs) == 1
    # Errors: the gRPC status and the server's message; local range errors before anything is sent.
    with pytest.raises(MtpserveError) as e:
        client.generate(PROMPT, model="nope")
    assert e.value.status == grpc.StatusCode.NOT_FOUND and e.value.code == "NOT_FOUND"
    assert "does not exist" in e.value.message
    with pytest.raises(MtpserveError) as e:
        client.generate(PROMPT, max_tokens=-1)
    assert e.value.status == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(MtpserveError) as e:
        client.generate(PROMPT, top_k=-5)
    assert e.value.status == grpc.StatusCode.INVALID_ARGUMENT and "top_k" in e.value.message
    with pytest.raises(TypeError, match="unknown sampling parameter"):
        client.generate(PROMPT, temprature=0)
    # Leaving a stream early cancels it on the server.
    for chunk in client.generate_stream([8, 9], max_tokens=MAX_LEN - 2, temperature=0, ignore_eos=True):
        break
    state = ended_state(served, chunk.request_id)
    assert state.finish_reason is None
    wait_until_idle(served.engine)
    with GrpcClient("127.0.0.1:9", timeout=5) as nowhere:
        with pytest.raises(MtpserveError) as e:
            nowhere.health()
        assert e.value.status == grpc.StatusCode.UNAVAILABLE and "cannot reach 127.0.0.1:9" in e.value.message


def test_async_client(served, offline):
    expected = [offline.generate([i, i + 1, i + 2], SamplingParams(temperature=0, max_tokens=10,
                                                                   ignore_eos=True))[0].outputs[0].token_ids
                for i in range(5, 11)]

    async def run():
        async with AsyncGrpcClient("grpc://" + served.target, model=MODEL, timeout=30) as c:
            assert await c.health() and [m.id for m in await c.models()] == [MODEL]

            async def streamed(prompt):
                return [t async for ch in c.generate_stream(prompt, max_tokens=10, temperature=0, ignore_eos=True)
                        for t in ch.token_ids]

            prompts = [[i, i + 1, i + 2] for i in range(5, 11)]
            assert await asyncio.gather(*(streamed(p) for p in prompts)) == expected
            outs = await asyncio.gather(*(c.generate(p, max_tokens=10, temperature=0, ignore_eos=True)
                                          for p in prompts))
            assert [o.token_ids for o in outs] == expected and all(o.spec.num_drafts > 0 for o in outs)
            with pytest.raises(MtpserveError) as e:
                await c.generate([5, 6], presence_penalty=5.0)
            assert e.value.status == grpc.StatusCode.INVALID_ARGUMENT
            stream = c.generate_stream([8, 9], max_tokens=MAX_LEN - 2, temperature=0, ignore_eos=True)
            first = await stream.__anext__()
            await stream.aclose()  # cancels the call
            return first.request_id

    request_id = asyncio.run(run())
    assert ended_state(served, request_id).finish_reason is None
    wait_until_idle(served.engine)


# ---- mtpserve serve --grpc_port ---------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mtpserve_serve_with_grpc_port(model_dir):
    port, grpc_port = free_port(), free_port()
    proc = start_serve("--model", str(model_dir), "--dtype=float32",
           "--block_size", "8", "--max_cache_blocks=64", f"--port={port}", "--grpc_port", str(grpc_port),
           "--served_model_name", "cli-model", "--api_key=k", "--num_speculative_tokens", "1", "--log_level=warning")
    try:
        with GrpcClient(f"127.0.0.1:{grpc_port}", api_key="k", timeout=10) as c:
            wait_until_healthy(c, proc)
            assert [m.id for m in c.models()] == ["cli-model"]
            out = c.generate(PROMPT, max_tokens=4, temperature=0, ignore_eos=True)
            assert out.usage.completion_tokens == 4 and out.spec.num_drafts > 0
            with Client(f"http://127.0.0.1:{port}", api_key="k", timeout=10) as http:
                assert http.health() is True
                assert http.completions(PROMPT, max_tokens=4, temperature=0, ignore_eos=True).text == out.text
                # One engine behind both APIs: the gRPC request shows in /metrics.
                assert "mtpserve:request_success_total" in http.metrics()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=20) == 0, proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()


@pytest.mark.parametrize("flags, message", [(["--grpc_port=70000"], "--grpc_port"),
                                            (["--port=9000", "--grpc_port=9000"], "must differ")])
def test_serve_refuses_bad_grpc_port(capsys, flags, message):
    from mtpserve.cli import main as cli_main

    assert cli_main(["serve", *flags]) == 2
    assert message in capsys.readouterr().err


# ---- generated code ---------------------------------------------------------------------------------

def test_committed_stubs_are_up_to_date(tmp_path):
    """The committed stubs describe proto/mtpserve.proto exactly; with the pinned grpcio-tools
    installed, they are byte for byte what scripts/gen_proto.sh writes."""
    pytest.importorskip("grpc_tools")
    from google.protobuf import descriptor_pb2

    committed = ROOT / "python/mtpserve/grpc_api"
    assert "from . import mtpserve_pb2 as " in (committed / "mtpserve_pb2_grpc.py").read_text()
    # Version-independent: the committed descriptor equals the one protoc makes from the .proto now.
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                    f"--descriptor_set_out={tmp_path / 'set.pb'}", str(ROOT / "proto/mtpserve.proto")], check=True)
    fresh = descriptor_pb2.FileDescriptorSet.FromString((tmp_path / "set.pb").read_bytes()).file[0]

    def drop_json_names(messages):  # the Python gencode leaves json_name out
        for message in messages:
            for f in message.field:
                f.ClearField("json_name")
            drop_json_names(message.nested_type)

    drop_json_names(fresh.message_type)
    assert descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb) == fresh, \
        "proto/mtpserve.proto changed: run scripts/gen_proto.sh and commit the stubs"
    pinned = re.search(r"^GRPCIO_TOOLS_VERSION=(\S+)$", (ROOT / "scripts/gen_proto.sh").read_text(), re.M).group(1)
    installed = importlib.metadata.version("grpcio-tools")
    if installed != pinned:
        pytest.skip(f"byte-for-byte check needs grpcio-tools=={pinned} (installed: {installed})")
    out = tmp_path / "gen"
    subprocess.run(["bash", str(ROOT / "scripts/gen_proto.sh"), "mtpserve", str(out)], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHON": sys.executable}, capture_output=True)
    for name in ("mtpserve_pb2.py", "mtpserve_pb2_grpc.py"):
        assert (out / name).read_text() == (committed / name).read_text(), \
            f"{name} is stale: run scripts/gen_proto.sh and commit the stubs"
