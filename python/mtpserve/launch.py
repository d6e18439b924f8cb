"""`mtpserve launch --nnodes N [serve flags]`: starts N local ranks of `mtpserve serve` (rank i
gets --node_rank=i, all share --master_node_addr, default 127.0.0.1 on a free port pair) and
supervises them: SIGINT/SIGTERM are forwarded to every rank, and when one rank exits the others
are stopped (SIGTERM, then SIGKILL after a grace period). Exits with the first non-zero code.
A launcher that is killed outright (SIGKILL) takes its ranks with it: each rank gets SIGTERM
from the kernel when its parent dies (PR_SET_PDEATHSIG). The ranks share a cluster token
($MTPSERVE_CLUSTER_TOKEN, else a random one) for their control plane."""
from __future__ import annotations

import ctypes
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

logger = logging.getLogger("mtpserve.launch")

STOP_GRACE_S = 20.0


def free_port_pair(host: str = "127.0.0.1") -> int:
    """A port p with p and p + 1 both free (control service, c10d rendezvous)."""
    for _ in range(100):
        with socket.socket() as a:
            a.bind((host, 0))
            port = a.getsockname()[1]
            if port + 1 >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind((host, port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free pair of ports for --master_node_addr")


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int):
    """preexec_fn of a rank: SIGTERM when the launcher dies, however it dies (Linux)."""
    def set_it() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            return
        if os.getppid() != parent_pid:  # the launcher died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)
    return set_it


def launch(nnodes: int, serve_argv: list[str], master_node_addr: str | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    master = master_node_addr or f"127.0.0.1:{free_port_pair()}"
    procs: list[subprocess.Popen] = []
    # The ranks share a cluster token: the given one, else a fresh one (in their environment, never
    # on a command line), so that a local group's control plane is locked down by default.
    env = {**os.environ, "MTPSERVE_CLUSTER_TOKEN": os.environ.get("MTPSERVE_CLUSTER_TOKEN") or secrets.token_hex(16)}
    for rank in range(nnodes):
        cmd = [sys.executable, "-m", "mtpserve.cli", "serve", *serve_argv, f"--nnodes={nnodes}",
               f"--master_node_addr={master}", f"--node_rank={rank}"]
        procs.append(subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent(os.getpid())))
        logger.info("rank %d: pid %d", rank, procs[-1].pid)

    stopping = {"signal": None}

    def forward(sig, _frame):
        stopping["signal"] = sig
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = 0
        while all(p.poll() is None for p in procs):
            time.sleep(0.2)
        first = next(i for i, p in enumerate(procs) if p.poll() is not None)
        code = procs[first].returncode
        if stopping["signal"] is None:
            logger.error("rank %d exited with code %s: stopping the other ranks", first, code)
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.error("pid %d did not stop within %g s: killing it", p.pid, STOP_GRACE_S)
                p.kill()
                p.wait()
        if stopping["signal"] is not None:
            return 0
        # A rank killed by signal N reads as 128 + N, as in a shell.
        return next((c if c > 0 else 128 - c for c in (p.returncode for p in procs) if c), 0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
