"""Data-parallel attention over gloo (--dp_size): the ranks form attention groups, each with its own engine;
rank 0 balances requests over them. Every answer equals one rank's greedy answer, with MTP k = 1..3 too,
both groups get work; with --ep_size = --nnodes the groups step in lockstep for the expert all-to-alls,
an idle group included; the real server balances concurrent, streamed and aborted requests; impossible
layouts are refused naming the numbers."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from mtpserve import LLM
from mtpserve.cli import main
from mtpserve.distributed import check_parallel_sizes
from mtpserve.grpc_client import GrpcClient
from mtpserve.launch import free_port_pair
from mtpserve.sampling_params import SamplingParams
from rank_group import one_rank, run_group
from test_expert_parallel import GREEDY, PROMPTS, engine, skewed_model_dir, tokens  # noqa: F401 (a fixture)
from conftest import write_tiny_model
from test_launch import wait_gone, wait_healthy


TOKENS = [[t % 400 for t in p] for p in PROMPTS]


def test_two_groups_share_the_requests_and_answer_as_one_rank(tiny_model_dir, tmp_path):
    """--nnodes 2 --dp_size 2 (no EP: the groups run independently), MTP k = 0..3."""
    prompts = TOKENS
    expected = tokens(one_rank([engine(tiny_model_dir, 0)], prompts, GREEDY)[0])
    ks = (0, 1, 2, 3)
    got, by_group = run_group(2, [engine(tiny_model_dir, k) for k in ks], prompts, GREEDY, tmp_path / "dp.pt",
                              dp_size=2, with_groups=True)
    for k, outputs, run in zip(ks, got, by_group):
        assert tokens(outputs) == expected, f"DP=2, k={k}"
        counts = run["requests"]
        assert len(counts) == 2 and min(counts) > 0 and sum(counts) == len(prompts), counts
        # The engine's MTP counters are the sum over both groups of what each request reports.
        per_request = [sum(o["spec"][i] for o in outputs) for i in range(3)]
        assert run["spec"] == tuple(per_request), (run["spec"], per_request)
        assert (per_request[1] > 0) == (k > 0)


def test_two_groups_of_two_ranks_answer_as_one_rank(tiny_model_dir, tmp_path):
    """--nnodes 4 --dp_size 2: tensor parallel inside each group of two ranks."""
    prompts = TOKENS
    expected = tokens(one_rank([engine(tiny_model_dir, 0)], prompts, GREEDY)[0])
    got = run_group(4, [engine(tiny_model_dir, k) for k in (0, 2)], prompts, GREEDY, tmp_path / "dp.pt", dp_size=2)
    for k, outputs in zip((0, 2), got):
        assert tokens(outputs) == expected, f"TP=2 x DP=2, k={k}"


@pytest.mark.parametrize("world, model, ks, num_prompts", [
    (2, "tiny", (0, 1, 2, 3), 4),
    (2, "tiny", (0, 2), 1),  # one request: group 1 runs only empty steps while group 0 prefills and decodes
    (2, "skewed", (0, 3), 4),  # every token to rank 0's experts
    (4, "tiny", (0, 2), 3),  # 2 groups of 2 ranks, experts over all 4
])
def test_expert_parallel_groups_in_lockstep_answer_as_one_rank(world, model, ks, num_prompts, tiny_model_dir,
                                                                skewed_model_dir, tmp_path):
    model_dir = {"tiny": tiny_model_dir, "skewed": skewed_model_dir}[model]
    prompts = TOKENS[:num_prompts]
    expected = tokens(one_rank([engine(model_dir, 0)], prompts, GREEDY)[0])
    got, by_group = run_group(world, [engine(model_dir, k) for k in ks], prompts, GREEDY, tmp_path / "epdp.pt",
                              ep_size=world, dp_size=2, with_groups=True)
    for k, outputs, run in zip(ks, got, by_group):
        assert tokens(outputs) == expected, f"EP={world} x DP=2, k={k}"
        counts = run["requests"]
        assert min(counts) > 0 if num_prompts > 1 else counts == [1, 0], counts


@pytest.mark.parametrize("nnodes, ep_size, dp_size, message", [
    (3, 1, 2, "--dp_size=2 does not divide --nnodes 3"),
    (4, 2, 2, "--ep_size=2 with --nnodes 4"),
    (2, 1, 0, "--dp_size must be >= 1, got 0"),
    (2, 3, 1, "--ep_size=3 with --nnodes 2"),
])
def test_impossible_layouts_are_refused(nnodes, ep_size, dp_size, message, capsys):
    with pytest.raises(ValueError, match=message):
        check_parallel_sizes(nnodes, ep_size, dp_size)
    code = main(["serve", f"--nnodes={nnodes}", f"--ep_size={ep_size}", f"--dp_size={dp_size}",
                 "--master_node_addr=127.0.0.1:1"])
    assert code == 2 and message in capsys.readouterr().err


def test_an_ipv6_master_is_refused_with_data_parallelism(capsys):
    # The links between attention groups open IPv4 sockets; without --dp_size an IPv6 master is fine.
    code = main(["serve", "--nnodes=2", "--dp_size=2", "--master_node_addr=[::1]:29500"])
    assert code == 2 and "--dp_size 2 needs an IPv4 or host-name --master_node_addr" in capsys.readouterr().err


def test_layouts_the_model_cannot_take_are_refused_at_start(tiny_model_dir, capsys):
    """The tiny model has 8 routed experts and 4 attention heads."""
    base = ["serve", f"--model={tiny_model_dir}", "--master_node_addr=127.0.0.1:1"]
    assert main([*base, "--nnodes=3", "--ep_size=3"]) == 2
    assert "--ep_size=3 does not divide the model's 8 routed experts" in capsys.readouterr().err
    assert main([*base, "--nnodes=16", "--dp_size=2"]) == 2
    assert "attention groups of 8 ranks: 8 does not divide the model's 4 attention heads" in capsys.readouterr().err


def test_one_rank_refuses_data_parallelism(tiny_model_dir):
    with pytest.raises(ValueError, match="dp_size=2 needs at least 2 ranks"):
        LLM(str(tiny_model_dir), dp_size=2, max_cache_blocks=8)


def metric(url: str, name: str) -> float | None:
    lines = [line for line in httpx.get(url + "/metrics", timeout=10).text.splitlines() if line.startswith(name)]
    return float(lines[0].split()[-1]) if lines else None


def group_requests(url: str) -> dict[str, float]:
    metrics = httpx.get(url + "/metrics", timeout=10).text
    return {line.split('dp_group="')[1].split('"')[0]: float(line.split()[-1])
            for line in metrics.splitlines() if line.startswith("mtpserve:dp_group_requests_total")}


def wait_for_metric(url: str, name: str, value: float, bound_s: float = 60.0) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if metric(url, name) == value:
            return True
        time.sleep(0.1)
    return False


def launch(model_dir, tmp_path, *flags) -> tuple[subprocess.Popen, str, Path]:
    """`mtpserve launch --nnodes 2 --dp_size 2 [flags]` on loopback, healthy; (launcher, URL, its log)."""
    port = free_port_pair()
    cmd = [sys.executable, "-m", "mtpserve.cli", "launch", "--nnodes=2", "--dp_size=2", "--model", str(model_dir),
           f"--port={port}", "--dtype=float32", "--block_size=8", "--max_cache_blocks=96", "--served_model_name=tiny",
           "--log_level=info", *flags]
    log_file = tmp_path / "launch.log"
    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, [proc.pid], tmp_path)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, url, log_file


SERVER_PROMPTS = ["the quick brown fox", "hello there, how are you", "one two three four five six", "a"]


@pytest.fixture(scope="module")
def long_context_model_dir(tmp_path_factory):
    """The tiny model with room for a request that cannot finish while the test routes another one."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny_long"), max_position_embeddings=4096)


LONG_REQUEST_TOKENS = 3000


@pytest.mark.parametrize("ep_size", [1, 2])
def test_server_balances_over_two_groups(long_context_model_dir, tmp_path, ep_size):
    """`mtpserve launch --nnodes 2 --dp_size 2` with the openai client: concurrent requests answer as one rank,
    both groups get some, gRPC and streams work, an abandoned stream is aborted in its group, a grammar request
    runs on group 1, the MTP counters count."""
    llm = LLM(str(long_context_model_dir), dtype="float32", block_size=8, max_cache_blocks=96)
    try:
        expected = [o.outputs[0].text for o in llm.generate(
            SERVER_PROMPTS, SamplingParams(max_tokens=16, temperature=0, ignore_eos=True))]
    finally:
        llm.shutdown()
    grpc_port = free_port_pair()
    proc, url, log_file = launch(long_context_model_dir, tmp_path, f"--ep_size={ep_size}", "--num_speculative_tokens=2",
                                 f"--grpc_port={grpc_port}", "--max_cache_blocks=512")
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        results: list = [None] * len(SERVER_PROMPTS)

        def one(i):
            r = client.completions.create(model="tiny", prompt=SERVER_PROMPTS[i], max_tokens=16, temperature=0,
                                          extra_body={"ignore_eos": True})
            results[i] = r.choices[0].text

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(SERVER_PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert results == expected, log_file.read_text()[-3000:]

        with GrpcClient(f"127.0.0.1:{grpc_port}", timeout=60) as grpc_client:  # the gRPC API balances alike
            assert grpc_client.generate(SERVER_PROMPTS[3], max_tokens=16, temperature=0, ignore_eos=True).text == \
                expected[3]
        streamed = "".join(c.choices[0].text for c in client.completions.create(
            model="tiny", prompt=SERVER_PROMPTS[1], max_tokens=16, temperature=0, stream=True,
            extra_body={"ignore_eos": True}))
        assert streamed == expected[1]
        before = group_requests(url)
        with client.completions.create(model="tiny", prompt=SERVER_PROMPTS[2], max_tokens=LONG_REQUEST_TOKENS,
                                       temperature=0, stream=True, extra_body={"ignore_eos": True}) as stream:
            next(iter(stream))
            # While group 0 holds that request, a request with a grammar goes to group 1, which makes its own.
            schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                      "additionalProperties": False}
            answer = client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "JSON please"}], max_tokens=24, temperature=0,
                response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}})
            assert answer.choices[0].message.content.lstrip().startswith("{"), answer
        # ... then the client goes away: the long request is aborted in its group.
        groups = group_requests(url)
        assert groups["0"] == before["0"] + 1 and groups["1"] == before["1"] + 1, (before, groups)
        assert set(groups) == {"0", "1"} and min(groups.values()) > 0 and sum(groups.values()) == 8, groups
        assert metric(url, "mtpserve:spec_decode_num_draft_tokens") > 0
        # The abandoned request is aborted in its group (nothing left running) and the server serves on.
        assert wait_for_metric(url, "mtpserve:num_requests_running", 0.0)
        generated = metric(url, "mtpserve:generation_tokens_total")
        assert generated < 6 * 16 + 24 + LONG_REQUEST_TOKENS, generated  # short of the abandoned request's tokens
        assert client.completions.create(model="tiny", prompt="a", max_tokens=4, temperature=0).choices[0].text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log_file.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "connecting to the engines of attention groups 1..1" in log_file.read_text()
    assert not wait_gone([proc.pid], 5)


def test_server_fails_every_stream_when_a_group_leader_dies(tiny_model_dir, tmp_path):
    """EP 2 x DP 2: SIGKILL of group 1's leader (rank 1) while both groups stream ends both streams with an
    error (group 0's at once: its next lockstep agreement fails), and rank 0 exits non-zero."""
    proc, url, log_file = launch(tiny_model_dir, tmp_path, "--ep_size=2")
    try:
        pids = [int(line.split("pid ")[1]) for line in log_file.read_text().splitlines()
                if "mtpserve.launch: rank" in line]
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)
        errors: list = [None, None]
        first = [threading.Event(), threading.Event()]

        def stream(i):
            try:
                for _ in client.completions.create(model="tiny", prompt=SERVER_PROMPTS[i], max_tokens=220,
                                                   temperature=0, stream=True, extra_body={"ignore_eos": True}):
                    first[i].set()
            except openai.APIError as e:  # the stream's error event
                errors[i] = e.message
            first[i].set()

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        assert all(e.wait(60) for e in first)
        assert group_requests(url) == {"0": 1.0, "1": 1.0}
        os.kill(pids[1], signal.SIGKILL)
        for t in threads:
            t.join(60)
        # Group 0's collective fails the moment rank 1's sockets close, which can be before its process is
        # seen gone: that stream's error may then name no rank, only the failed collective.
        assert all(error and ("rank 1" in error or "a rank died" in error) for error in errors), errors
        assert any("rank 1" in error for error in errors), errors
        assert proc.wait(60) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
