"""Discovering the APIs: /openapi.json (a valid OpenAPI 3 document) and /docs behind --api_key, and
gRPC server reflection read with grpcio-reflection's own client."""
import grpc
import httpx
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from openapi_spec_validator import validate

from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.grpc_api.server import BackgroundGrpcServer
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer

KEY = "test-key"


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(tiny_model_dir), dtype="float32", block_size=8,
                                               max_cache_blocks=64)))
    yield engine
    engine.shutdown()


def test_openapi_document_and_docs_page_need_the_key(engine):
    server = BackgroundServer(build_app(engine, "tiny", api_key=KEY)).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.get("/openapi.json").status_code == 401
            assert http.get("/docs").status_code == 401
            auth = {"Authorization": f"Bearer {KEY}"}
            document = http.get("/openapi.json", headers=auth).json()
            docs = http.get("/docs", headers=auth)
    finally:
        server.stop()
    validate(document)  # raises on anything that is not valid OpenAPI 3
    assert document["openapi"].startswith("3.")
    assert {"/v1/completions", "/v1/chat/completions", "/v1/models"} <= set(document["paths"])
    completion = document["components"]["schemas"]["CompletionRequest"]["properties"]
    assert {"prompt", "n", "best_of", "max_tokens"} <= set(completion)
    # Errors are documented in the shape the server sends (OpenAI's), not FastAPI's HTTPValidationError.
    responses = document["paths"]["/v1/completions"]["post"]["responses"]
    assert {"400", "401", "413", "422", "503"} <= set(responses)
    assert responses["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert "text/plain" in document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert docs.status_code == 200 and "/openapi.json" in docs.text


def test_grpc_reflection_lists_and_describes_the_public_api(engine):
    server = BackgroundGrpcServer(engine, "tiny", api_key=KEY).start()
    try:
        with grpc.insecure_channel(server.target) as channel:
            database = ProtoReflectionDescriptorDatabase(channel)
            services = set(database.get_services())
            generation = DescriptorPool(database).FindServiceByName("mtpserve.v1.Generation")
            methods = {m.name for m in generation.methods}
    finally:
        server.stop()
    assert {"mtpserve.v1.Generation", "grpc.health.v1.Health"} <= services
    assert {"Generate", "Models"} <= methods
