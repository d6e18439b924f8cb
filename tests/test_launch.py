"""Two ranks (TP=2 over gloo) as real processes on loopback, started by scripts/launch.sh exactly as
users run it: greedy output equals one rank's, with MTP off and on; a worker killed with SIGKILL
turns /health unhealthy, ends open streams with an error naming the rank and makes rank 0 exit; SIGTERM to rank 0 then
stops every process. Plus `mtpserve launch`, which starts and supervises local ranks."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from mtpserve import LLM
from mtpserve.launch import free_port_pair
from mtpserve.sampling_params import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=96)
PROMPTS = ["the quick brown fox", "hello there, how are you", "one two three four five six", "a"]
MAX_TOKENS = 24


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours (launch.sh's children are not) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def logs(log_dir: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(log_dir.glob("*.log")))


def wait_healthy(url: str, pids, log_dir: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert all(alive(p) for p in pids), "a rank exited during start-up:\n" + logs(log_dir)
        assert time.monotonic() < deadline, "the ranks did not become healthy:\n" + logs(log_dir)
        time.sleep(0.25)


def start_with_launch_sh(model_dir: Path, log_dir: Path, k: int) -> SimpleNamespace:
    port, master = free_port_pair(), free_port_pair()
    env = {**os.environ, "MTPSERVE": f"{sys.executable} -m mtpserve.cli", "MODEL_PATH": str(model_dir),
           "NNODES": "2", "PORT": str(port), "MASTER_NODE_ADDR": f"127.0.0.1:{master}", "LOG_DIR": str(log_dir),
           "NUM_SPECULATIVE_TOKENS": str(k), "PYTHONUNBUFFERED": "1"}
    flags = [f"--dtype={ENGINE['dtype']}", f"--block_size={ENGINE['block_size']}",
             f"--max_cache_blocks={ENGINE['max_cache_blocks']}", "--log_level=info"]
    out = subprocess.run([str(ROOT / "scripts" / "launch.sh"), *flags], env=env, capture_output=True, text=True,
                         timeout=30, check=True)
    pids = [int((log_dir / f"rank_{i}.pid").read_text()) for i in range(2)]
    assert f"rank 1: pid {pids[1]}" in out.stdout
    ranks = SimpleNamespace(url=f"http://127.0.0.1:{port}", pids=pids, log_dir=log_dir)
    try:
        wait_healthy(ranks.url, pids, log_dir)
    except BaseException:
        stop(ranks)
        raise
    return ranks


def stop(ranks: SimpleNamespace) -> None:
    """SIGTERM to rank 0 (which stops the workers); SIGKILL whatever is left after a bound."""
    if alive(ranks.pids[0]):
        os.kill(ranks.pids[0], signal.SIGTERM)
    left = wait_gone(ranks.pids, 30)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes {left} did not exit after SIGTERM to rank 0:\n" + logs(ranks.log_dir)


def complete(url: str, prompt: str) -> str:
    r = httpx.post(url + "/v1/completions", timeout=60,
                   json={"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def complete_all(url: str) -> list[str]:
    """Concurrent requests, so that the two ranks run batched steps."""
    results: list = [None] * len(PROMPTS)

    def one(i):
        results[i] = complete(url, PROMPTS[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(r is not None for r in results)
    return results


@pytest.fixture(scope="module")
def one_rank(tiny_model_dir):
    llm = LLM(str(tiny_model_dir), **ENGINE)
    try:
        outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, temperature=0, ignore_eos=True))
        return [o.outputs[0].text for o in outs]
    finally:
        llm.shutdown()


def test_two_ranks_with_mtp_equal_one_rank(tiny_model_dir, tmp_path, one_rank):
    ranks = start_with_launch_sh(tiny_model_dir, tmp_path, k=1)
    try:
        assert complete_all(ranks.url) == one_rank
        metrics = httpx.get(ranks.url + "/metrics", timeout=10).text
        drafts = [line for line in metrics.splitlines() if line.startswith("mtpserve:spec_decode_num_drafts")]
        assert drafts and float(drafts[0].split()[-1]) > 0  # MTP drafted on the two-rank group
    finally:
        stop(ranks)
    assert "shut down by rank 0" in (tmp_path / "rank_1.log").read_text()


def test_two_ranks_without_mtp_equal_one_rank_and_survive_nothing_on_sigkill(tiny_model_dir, tmp_path, one_rank):
    ranks = start_with_launch_sh(tiny_model_dir, tmp_path, k=0)
    try:
        assert complete_all(ranks.url) == one_rank

        # Open streams, then SIGKILL the worker while they are generating.
        events: list[list[dict]] = [[] for _ in range(3)]
        first_chunk = [threading.Event() for _ in range(3)]

        def stream(i):
            body = {"prompt": PROMPTS[i], "max_tokens": 220, "temperature": 0, "ignore_eos": True, "stream": True}
            with httpx.stream("POST", ranks.url + "/v1/completions", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        events[i].append(json.loads(line[6:]))
                        first_chunk[i].set()
            first_chunk[i].set()

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for e in first_chunk:
            assert e.wait(60)
        os.kill(ranks.pids[1], signal.SIGKILL)
        # /health turns unhealthy (or rank 0 is already gone): waited on, with a generous bound.
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(ranks.url + "/health", timeout=5).status_code == 503:
                    break
            except httpx.HTTPError:
                break  # rank 0 exited already (--exit_on_rank_failure, the default)
            assert time.monotonic() < deadline, "/health still healthy after a worker was killed:\n" + logs(tmp_path)
            time.sleep(0.1)
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        for ev in events:  # each stream ended with an error naming the dead rank, not with a finish
            assert "error" in ev[-1], ev[-1]
            message = ev[-1]["error"]["message"]
            assert "rank 1" in message and "GLHF" not in message and "gloo" not in message.lower(), message
            assert not any(c.get("choices") and c["choices"][0]["finish_reason"] for c in ev)
        # Rank 0 fails what was open, then exits non-zero so that a supervisor restarts the group.
        assert not wait_gone([ranks.pids[0]], 60), "rank 0 did not exit:\n" + logs(tmp_path)
        assert "exiting, so that a supervisor can restart the group" in (tmp_path / "rank_0.log").read_text()
    finally:
        stop(ranks)


@pytest.mark.parametrize("end", ["sigterm_to_launch", "sigkill_rank_1", "sigkill_launch"])
def test_mtpserve_launch_supervises_its_ranks(tiny_model_dir, tmp_path, end):
    port = free_port_pair()
    cmd = [sys.executable, "-m", "mtpserve.cli", "launch", "--nnodes=2", "--model", str(tiny_model_dir),
           f"--port={port}", "--dtype=float32", "--block_size=8", "--max_cache_blocks=32", "--log_level=warning"]
    log_file = tmp_path / "launch.log"
    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_healthy(f"http://127.0.0.1:{port}", [proc.pid], tmp_path)
        assert complete(f"http://127.0.0.1:{port}", PROMPTS[0])
        pids = [int(line.split("pid ")[1]) for line in log_file.read_text().splitlines()
                if "mtpserve.launch: rank" in line]
        assert len(pids) == 2
        if end == "sigterm_to_launch":  # forwarded to both ranks: an orderly stop
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log_file.read_text()
        elif end == "sigkill_rank_1":  # one rank dies: the launcher stops the other and reports the failure
            os.kill(pids[1], signal.SIGKILL)
            assert proc.wait(60) != 0, log_file.read_text()
            assert "rank 1 exited" in log_file.read_text()
        else:  # the launcher is killed outright: its ranks die with it (parent-death signal)
            proc.kill()
            proc.wait()
        assert not wait_gone(pids, 60), log_file.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_launch_sh_resolves_the_venv_and_fails_when_a_rank_dies_at_start(tmp_path):
    """Issue 17: with mtpserve not on PATH, launch.sh exited 0 printing pids of ranks that were gone."""
    env = {k: v for k, v in os.environ.items() if k != "MTPSERVE"}
    env.update(PATH="/usr/bin:/bin", LOG_DIR=str(tmp_path), MASTER_NODE_ADDR=f"127.0.0.1:{free_port_pair()}",
               STARTUP_CHECK_S="60")
    out = subprocess.run([str(ROOT / "scripts" / "launch.sh"), "--no_such_flag=1"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1, out
    assert "exited during start-up" in out.stderr and "no_such_flag" in out.stderr, out.stderr
    assert "failed to run command" not in (tmp_path / "rank_0.log").read_text()  # the venv's mtpserve ran
    out = subprocess.run([str(ROOT / "scripts" / "launch.sh")], env={**env, "MTPSERVE": "/no/such/mtpserve"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "is not a command" in out.stderr
