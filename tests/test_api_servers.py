"""Several API-server processes before one engine (`mtpserve serve --api_server_count N`), and the engine link
they use (engine_link.py): real processes, the official openai client, the offline engine as the reference."""
import os
import pickle
import re
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from openai import OpenAI

from mtpserve import LLM, SamplingParams, _C
from mtpserve.cli import main as cli_main
from mtpserve.client import Client
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.engine_link import EngineClient, EngineServer
from mtpserve.grpc_client import GrpcClient
from servers import assert_sigterm_drains, start_serve, wait_for, wait_until_healthy
from test_reliability import free_port

ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=64)
PROMPTS = ["the quick brown fox", "hello world", "a b c d e", "one two three four", "the cat sat on the mat",
           "to be or not to be", "red green blue", "alpha beta gamma"]


def _children(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry))
    return children


def _api_servers(pid: int) -> list[int]:
    """The API-server processes of the server `pid`, once they have exec'd multiprocessing's spawn_main."""
    return [child for child in _children(pid) if b"spawn_main" in open(f"/proc/{child}/cmdline", "rb").read()]


def _accepted(pid: int, port: int) -> int:
    """How many established TCP connections to local `port` process `pid` holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
                count += local_port == port and state == "01" and inode in inodes
    return count


def _read_all(client: EngineClient, request_id: str) -> list:
    """client's outputs until request_id's last one (bounded)."""
    outputs = []
    wait_for(lambda: outputs.extend(client.get_outputs(0.1)) or any(o.finished and o.request_id == request_id
                                                                     for o in outputs), f"{request_id} to finish")
    return outputs


def test_engine_server_routes_outputs_to_their_client_and_aborts_a_lost_clients_requests(tiny_model_dir, tmp_path):
    core = EngineCore(EngineArgs(model=str(tiny_model_dir), num_speculative_tokens=2, **ENGINE))
    server = EngineServer(core, str(tmp_path / "engine.sock"), clients=2, on_lost=lambda c, why: lost.append(c))
    lost = []
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    a, b = (EngineClient(server.address, server.key, client) for client in (0, 1))
    greedy = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    a.add_request("a1", [5, 6, 7, 8], greedy)
    b.add_request("b1", [5, 6, 7, 8], greedy)
    outs_a, outs_b = _read_all(a, "a1"), _read_all(b, "b1")
    assert {o.request_id for o in outs_a} == {"a1"} and {o.request_id for o in outs_b} == {"b1"}
    tokens = [t for o in outs_a for t in o.token_ids]
    assert len(tokens) == 16 and tokens == [t for o in outs_b for t in o.token_ids]
    b.add_request("b2", [9, 10, 11], SamplingParams(temperature=0, max_tokens=240, ignore_eos=True))
    with pytest.raises(ValueError, match="'a2' is already in use"):
        a.add_request("a2", [5, 6], greedy)
        b.add_request("a2", [5, 6], greedy)
    b.close()  # b's process is gone: b2 is aborted, a2 goes on
    wait_for(lambda: lost == [1], "the server to notice client 1 is gone")
    outs_a = _read_all(a, "a2")
    assert sum(len(o.token_ids) for o in outs_a) == 16
    wait_for(lambda: core.engine.stats().running == 0 and core.engine.stats().kv_usage == 0, "b2's blocks to be freed")
    assert core.engine.stats().generation_tokens < 3 * 16 + 240  # b2 ended before its 240 tokens
    a.shutdown()  # shuts the engine down
    thread.join(30)
    assert not thread.is_alive()


def test_outputs_read_the_same_after_crossing_to_another_process(tiny_model_dir):
    """What an API server in another process reads (Engine.get_output_states, pickled, then _C.request_outputs) equals
    what get_outputs gives in the engine's process for the same run: the same RequestOutput structs, logprobs, prompt
    logprobs, stops and MTP counters included."""
    params = [SamplingParams(temperature=0, max_tokens=12, logprobs=2, prompt_logprobs=1, ignore_eos=True),
              SamplingParams(temperature=0, max_tokens=30, stop_token_ids=[7, 13, 21]),
              SamplingParams(temperature=0.8, seed=3, max_tokens=9, ignore_eos=True)]
    runs = []
    for crossing in (False, True):
        llm = LLM(str(tiny_model_dir), num_speculative_tokens=2, speculative_policy="fixed", **ENGINE)
        engine, outputs = llm.core.engine, []
        engine.add_requests([(f"r{i}", [5 + i, 6, 7, 8], p.to_cpp()) for i, p in enumerate(params)])
        while sum(o.finished for o in outputs) < len(params):
            if crossing:
                outputs += _C.request_outputs(pickle.loads(pickle.dumps(engine.get_output_states(1.0))))
            else:
                outputs += engine.get_outputs(1.0)
        llm.shutdown()
        runs.append(outputs)
    assert runs[1] == runs[0]
    back = runs[1]
    assert {type(o) for o in back} == {_C.RequestOutput} and {type(o.spec) for o in back} == {_C.SpecCounters}
    r0 = [o for o in back if o.request_id == "r0"]
    assert sum(len(o.token_ids) for o in r0) == sum(len(o.logprobs) for o in r0) == 12
    assert all(type(e) is _C.TokenLogprobs and len(e.top) == 2 for o in r0 for e in o.logprobs)
    assert [len(o.prompt_logprobs) for o in r0] == [3] + [0] * (len(r0) - 1)  # prompt tokens but the first, once
    last = [o for o in back if o.request_id == "r1"][-1]
    assert last.finished and (last.finish_reason, last.stop_token) in [("length", None), ("stop", 7), ("stop", 13),
                                                                        ("stop", 21)]
    assert r0[-1].spec.draft_tokens > 0 and sum(r0[-1].spec.steps_by_k) > 0


def _metric(text: str, name: str, **labels) -> float:
    """The value of a sample of /metrics's text (labels given must match)."""
    for line in text.splitlines():
        match = re.match(rf"{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            return float(match.group(2))
    raise AssertionError(f"{name} {labels} is not in /metrics")


def test_api_servers_answer_as_the_offline_engine_count_together_and_drain(tiny_model_dir):
    """Two API servers (two processes beside the engine's) share a burst of new connections, give the offline
    engine's greedy tokens to concurrent clients (the gRPC API, on the first, too), /metrics counts every request
    whichever process renders it, and SIGTERM lets a running stream finish before everything exits 0."""
    port, grpc_port = free_port(), free_port()
    proc = start_serve("--model", str(tiny_model_dir), "--dtype=float32", "--block_size=8", "--max_cache_blocks=64",
                       "--num_speculative_tokens=2", f"--port={port}", f"--grpc_port={grpc_port}",
                       "--log_level=warning", "--api_server_count=2", "--shutdown_timeout=60")
    url = f"http://127.0.0.1:{port}"
    try:
        with Client(url, timeout=10) as client:
            wait_until_healthy(client, proc, timeout_s=120)
        wait_for(lambda: len(_api_servers(proc.pid)) == 2, "both API servers to start")
        connections = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(16)]
        try:  # a burst of connections is spread over both (on a shared socket, one process could accept them all)
            wait_for(lambda: sum(_accepted(pid, port) for pid in _api_servers(proc.pid)) == 16, "16 accepts")
            assert all(_accepted(pid, port) > 0 for pid in _api_servers(proc.pid))
        finally:
            for connection in connections:
                connection.close()

        def complete(prompt: str) -> str:
            with OpenAI(base_url=url + "/v1", api_key="none", max_retries=0) as client:  # a connection each
                return client.completions.create(model=tiny_model_dir.name, prompt=prompt, max_tokens=24,
                                                 temperature=0, extra_body={"ignore_eos": True}).choices[0].text

        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            served = list(pool.map(complete, PROMPTS))
        offline = LLM(str(tiny_model_dir), **ENGINE).generate(PROMPTS, SamplingParams(temperature=0, max_tokens=24,
                                                                                       ignore_eos=True))
        assert served == [o.outputs[0].text for o in offline]
        with GrpcClient(f"127.0.0.1:{grpc_port}", timeout=60) as grpc_client:
            assert grpc_client.generate(PROMPTS[0], temperature=0, max_tokens=24, ignore_eos=True).text == served[0]
        # A gRPC stream's end is recorded once its last message is out: waited for, boundedly.
        wait_for(lambda: _metric(httpx.get(url + "/metrics", timeout=10).text, "mtpserve:request_success_total",
                                 finished_reason="length") == len(PROMPTS) + 1, "every request to be counted")
        metrics = httpx.get(url + "/metrics", timeout=10).text
        assert _metric(metrics, "mtpserve:time_to_first_token_seconds_count") == len(PROMPTS) + 1
        assert _metric(metrics, "mtpserve:frontend_loop_cpu_seconds_total") > 0
        assert _metric(metrics, "mtpserve:generation_tokens_total") >= 24 * len(PROMPTS)
        assert_sigterm_drains(proc, url)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("flags, message", [
    (["--api_server_count=0"], "--api_server_count must be >= 1, got 0"),
    (["--api_server_count=2", "--nnodes=2", "--master_node_addr=127.0.0.1:29999"],
     "--api_server_count 2 needs --nnodes 1"),
])
def test_bad_api_server_counts_are_refused_before_loading(tiny_model_dir, capsys, flags, message):
    assert cli_main(["serve", "--model", str(tiny_model_dir), "--port=0", *flags]) == 2
    assert message in capsys.readouterr().err


def test_an_api_server_that_dies_leaves_the_others_serving_and_the_exit_code_says_so(tiny_model_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve("--model", str(tiny_model_dir), "--dtype=float32", "--block_size=8", "--max_cache_blocks=64",
                       f"--port={port}", "--log_level=warning", "--api_server_count=2")
    try:
        with Client(url, timeout=10) as client:
            wait_until_healthy(client, proc, timeout_s=120)
        wait_for(lambda: len(_api_servers(proc.pid)) == 2, "both API servers to start")
        killed = _api_servers(proc.pid)[0]
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: not os.path.exists(f"/proc/{killed}"), "the API server to be reaped")
        body = {"prompt": "hello world", "max_tokens": 8, "ignore_eos": True}
        for _ in range(4):  # new connections: each one reaches the API server that is left
            assert httpx.post(url + "/v1/completions", json=body, timeout=60).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 1
        assert re.search(r"mtpserve-api[01] exited with code -9", proc.stdout.read())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
