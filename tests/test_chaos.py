"""The short version of scripts/chaos (issue 17, R1/R2/R4/R5) against one `mtpserve serve`
process with the embedded model on loopback: malformed HTTP and gRPC traffic answered with clean
4xx / status codes (no 5xx, no connection resets, OpenAI's error shape; also schemathesis's cases
from /openapi.json, each answer checked against the document), a streaming storm with
disconnects that leaves no request running and no KV block in use, an overload burst that is
refused with 503 while admitted requests finish, and a hardened control plane. The long version
(scripts/chaos/chaos.py all) writes the figures of docs/reliability.md."""
import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "chaos"))
import chaos  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import os
    os.environ.setdefault("CHAOS_LOG_DIR", str(tmp_path_factory.mktemp("chaos")))
    s = chaos.Server("--max_queue_len=4", grpc=True)
    yield s
    assert s.stop() == 0


def test_http_fuzz(server):
    out = asyncio.run(chaos.http_fuzz(server.url, n=300, concurrency=8, seed=1))
    assert out["5xx"] == 0, out["examples_5xx"]
    assert out["connection_resets"] == 0, out["examples_resets"]
    assert out["non_openai_error_bodies"] == 0 and out["valid_request_after"], out


def test_schemathesis_against_the_openapi_document(server):
    # About 130 cases: valid and invalid ones by the document for each of its operations.
    out = chaos.schema_fuzz(server.url, examples=25)
    assert out["cases"] >= 100 and out["5xx"] == 0, out["examples_5xx"]
    assert out["connection_resets"] == 0, out["examples_resets"]
    assert out["non_openai_error_bodies"] == 0 and out["valid_request_after"], out
    # Every answer has a status, content type and body that the document names.
    assert out["schema_mismatches"] == 0, out["examples_mismatches"]
    assert out["statuses"].get(200, 0) > 0 and out["statuses"].get(422, 0) > 0, out


def test_grpc_fuzz(server):
    out = chaos.grpc_fuzz(f"127.0.0.1:{server.grpc_port}", n=100, seed=1)
    assert out["internal_or_unknown"] == 0 and out["unavailable"] == 0, out
    assert out["codes"].get("INVALID_ARGUMENT", 0) > 0


def test_streaming_disconnect_storm(server):
    # At most --max_queue_len (4) streams at a time: none is refused, so the drops are certain.
    out = asyncio.run(chaos.storm(server.url, clients=30, drop=0.3, concurrency=4, seed=1))
    assert out["dropped"] > 0 and out["refused"] == 0 and out["errors"] == 0, out
    assert out["running_after"] == 0 and out["kv_usage_after"] == 0, out


def test_overload_burst(server):
    out = asyncio.run(chaos.overload(server.url, n=60, max_tokens=16, pid=server.proc.pid))
    assert set(out["statuses"]) <= {200, 503} and out["client_errors"] == 0, out
    assert out["statuses"].get(503, 0) > 0 and out["statuses"].get(200, 0) > 0, out
    assert chaos.metric(server.url, "mtpserve:request_rejected_total") >= out["statuses"][503]


def test_cluster_hardening():
    out = chaos.cluster_check()
    assert out["refused_without_token"] == "3/3" and out["refused_forged"] == "4/4", out
    assert out["healthy_after"] and out["state_after"] == {}


def test_servers_listen_on_loopback_only(server):
    addrs = chaos.listening_sockets([server.proc.pid])
    if not addrs:
        pytest.skip("ss shows no sockets here")
    assert all("127.0.0.1" in a for a in addrs), addrs
