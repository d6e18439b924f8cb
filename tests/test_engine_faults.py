"""A fault inside the C++ engine's step (Engine.inject_fault_after, tests only): the requests in
flight end with a clear error (HTTP error body or stream error event, gRPC status, offline
exception), the server turns unhealthy and refuses new requests, and no client hangs."""
import threading

import grpc
import httpx
import openai
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import write_tiny_model
from servers import wait_for

from mtpserve import LLM
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.grpc_api import mtpserve_pb2 as pb
from mtpserve.grpc_api import mtpserve_pb2_grpc as pb_grpc
from mtpserve.grpc_api.server import BackgroundGrpcServer
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer

MODEL = "tiny-dsv3"
ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=256)
LONG = 900  # tokens: the requests are still running when the fault is injected


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("tiny_faults"), max_position_embeddings=1024)


def test_a_fault_inside_a_step_fails_requests_and_health(model_dir):
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(model_dir), num_speculative_tokens=1, **ENGINE)))
    http_server = BackgroundServer(build_app(engine, MODEL)).start()
    grpc_server = BackgroundGrpcServer(engine, MODEL).start()
    channel = grpc.insecure_channel(grpc_server.target)
    outcomes = {}
    try:
        with openai.OpenAI(base_url=http_server.url + "/v1", api_key="none", max_retries=0, timeout=60) as oai:
            assert oai.completions.create(model=MODEL, prompt="warm up", max_tokens=4).choices[0].text is not None

            def stream():
                chunks = oai.completions.create(model=MODEL, prompt="a stream", max_tokens=LONG, stream=True,
                                                extra_body={"ignore_eos": True})
                try:
                    for _ in chunks:
                        outcomes["stream_chunks"] = outcomes.get("stream_chunks", 0) + 1
                except openai.APIError as e:
                    outcomes["stream"] = e

            def whole():
                outcomes["whole"] = httpx.post(http_server.url + "/v1/completions", timeout=60, json={
                    "model": MODEL, "prompt": "a whole answer", "max_tokens": LONG, "ignore_eos": True})

            def rpc():
                request = pb.GenerateRequest(text="a gRPC stream", sampling_params=pb.SamplingParams(
                    temperature=0, max_tokens=LONG, ignore_eos=True))
                try:
                    for _ in pb_grpc.GenerationStub(channel).Generate(request, timeout=60):
                        pass
                except grpc.RpcError as e:
                    outcomes["grpc"] = e

            clients = [threading.Thread(target=f) for f in (stream, whole, rpc)]
            for t in clients:
                t.start()
            wait_for(lambda: engine.stats().running == 3 and outcomes.get("stream_chunks"), "3 running requests")
            engine.engine.inject_fault_after(1)
            for t in clients:
                t.join(60)
            assert not any(t.is_alive() for t in clients), "a client hangs after the engine fault"

            assert "engine step failed: injected fault" in str(outcomes["stream"]), outcomes
            r = outcomes["whole"]
            assert r.status_code == 500, r.text
            assert set(r.json()["error"]) == {"message", "type", "param", "code"}, r.text
            assert "engine step failed: injected fault" in r.json()["error"]["message"]
            assert outcomes["grpc"].code() == grpc.StatusCode.UNAVAILABLE, outcomes["grpc"]
            assert "injected fault" in outcomes["grpc"].details()

            health = httpx.get(http_server.url + "/health", timeout=30)
            assert health.status_code == 503 and health.json()["status"] == "unhealthy", health.text
            assert "engine step failed" in health.json()["error"]["message"]
            with pytest.raises(openai.APIStatusError) as refused:
                oai.completions.create(model=MODEL, prompt="after the fault", max_tokens=4)
            assert refused.value.status_code == 503 and "engine step failed" in refused.value.message
        grpc_health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert grpc_health.status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert engine.num_open_streams == 0
    finally:
        channel.close()
        grpc_server.stop()
        http_server.stop()
        engine.shutdown()


def test_a_fault_inside_a_step_raises_offline(model_dir):
    llm = LLM(str(model_dir), **ENGINE)
    try:
        llm.core.engine.inject_fault_after(2)
        params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
        with pytest.raises(RuntimeError, match="engine step failed: injected fault"):
            llm.generate(["first", "second"], params)
        with pytest.raises(RuntimeError, match="the engine failed: engine step failed"):
            llm.generate(["after the fault"], params)
    finally:
        llm.shutdown()
