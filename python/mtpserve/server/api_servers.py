"""`--api_server_count N` (N > 1): N API-server processes before one engine.

This process loads the engine and serves it to the API servers (engine_link.EngineServer, on a Unix socket in a
private directory), then starts them and supervises them. Each API server is a process with its own GIL: it
serves the HTTP API on a listening socket of its own, all bound to one port (SO_REUSEPORT: the kernel hashes
each new connection to one of them), tokenizes, renders chat templates, detokenizes, applies stop strings and
streams; the first one also serves the gRPC API. One process's GIL bounds the request rate one frontend can serve
(about 250 streamed requests a second on an H200's host, docs/benchmarks.md), while the engine's steps run in C++
without it.

What the API servers count for /metrics (per-request latencies, finish reasons, refusals, their event loops'
CPU seconds) is shared through prometheus_client's multiprocess mode, so every one of them renders the sum.
The admission limits (--max_queue_len, --max_queued_tokens) are split evenly among them.

SIGTERM or SIGINT here is passed on to every API server as SIGTERM: each drains (a second signal ends them at
once), and the engine shuts down once they have all exited. An API server that dies has its open requests
aborted in the engine; the others go on serving, and this process exits with code 1 once none is left.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace

from mtpserve.engine_args import EngineArgs
from mtpserve.engine_link import EngineClient, EngineServer
from mtpserve.server.frontend import Frontend, admission_limits, configure_logging, frontend_server

logger = logging.getLogger("mtpserve.server")

# How long the engine's process waits for the API servers to exit after the drain's own deadline.
_EXIT_GRACE_S = 15.0


@dataclass
class ApiServerSpec:
    """What an API-server process is started with (pickled to it)."""
    index: int
    count: int
    sock: socket.socket  # this API server's listening socket of the HTTP API (one port, SO_REUSEPORT)
    engine_address: str
    engine_key: bytes
    args: EngineArgs
    frontend: Frontend
    max_model_len: int
    num_blocks: int
    vocab_size: int


class ApiServerCore:
    """What an API server's AsyncEngine wraps: the engine of the engine's process (an EngineClient) and this
    process's own tokenizer."""

    def __init__(self, spec: ApiServerSpec):
        from mtpserve.tokenizer import Tokenizer

        self.args, self.max_model_len, self.num_blocks = spec.args, spec.max_model_len, spec.num_blocks
        self.model = SimpleNamespace(config=SimpleNamespace(vocab_size=spec.vocab_size))
        self.tokenizer = Tokenizer.from_dir(spec.args.model_path)
        self.engine = EngineClient(spec.engine_address, spec.engine_key, spec.index, what="the engine's process")

    def submit(self, request_id: str, prompt: list[int], params) -> None:
        self.engine.add_request(request_id, prompt, params)

    def shutdown(self) -> None:
        self.engine.close()


def serve_api_servers(args: EngineArgs, http_sockets: list[socket.socket], frontend: Frontend) -> None:
    """Loads the engine, serves it through an API-server process per listening socket until they have all exited,
    then shuts it down; raises SystemExit(1) when an API server failed."""
    from mtpserve.engine import EngineCore

    count = len(http_sockets)
    core = EngineCore(args)
    private = tempfile.mkdtemp(prefix="mtpserve-")  # mode 0700: the engine's socket and the shared metrics
    server = None
    try:
        server = EngineServer(core, os.path.join(private, "engine.sock"), clients=count)
        threading.Thread(target=server.run, name="mtpserve-engine-server", daemon=True).start()
        os.mkdir(os.path.join(private, "metrics"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.path.join(private, "metrics")  # inherited by the API servers
        specs = [ApiServerSpec(i, count, http_sockets[i], server.address, server.key, args,
                               frontend if i == 0 else dataclasses.replace(frontend, grpc_port=0),
                               core.max_model_len, core.num_blocks, core.model.config.vocab_size)
                 for i in range(count)]
        failed = _supervise(specs, frontend.options.shutdown_timeout_s)
    finally:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        if server is not None:
            server.stop()  # no thread left inside the engine when it goes
        core.shutdown()
        shutil.rmtree(private, ignore_errors=True)
    if failed:
        raise SystemExit(1)


def _supervise(specs: list[ApiServerSpec], shutdown_timeout_s: float) -> bool:
    """Starts the API servers and waits for all of them to exit; True when one exited with an error."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=run_api_server, args=(spec,), name=f"mtpserve-api{spec.index}")
                 for spec in specs]
    for process in processes:
        process.start()
    for spec in specs:
        spec.sock.close()  # each API server has its own copy; one that exits takes its socket out of the port's group
    logger.info("started %d API servers (pids %s)", len(processes), ", ".join(str(p.pid) for p in processes))
    stopping = threading.Event()

    def stop(sig, frame) -> None:
        stopping.set()
        for process in processes:
            if process.is_alive():
                os.kill(process.pid, signal.SIGTERM)

    original = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    failed = False
    try:
        running = list(processes)
        while running:
            multiprocessing.connection.wait([p.sentinel for p in running], timeout=1.0)
            for process in [p for p in running if not p.is_alive()]:
                running.remove(process)
                # An API server still starting when told to stop ends by the SIGTERM itself.
                if process.exitcode != 0 and not (stopping.is_set() and process.exitcode == -signal.SIGTERM):
                    failed = True
                    logger.error("%s exited with code %s; its open requests were aborted; %d API servers are left",
                                 process.name, process.exitcode, len(running))
            if stopping.is_set() and running:
                _join(running, shutdown_timeout_s + _EXIT_GRACE_S)  # the next round collects their exit codes
    finally:
        for sig, handler in original.items():
            signal.signal(sig, handler)
    return failed


def _join(processes: list, timeout_s: float) -> None:
    """Waits for the draining API servers; kills what is left after timeout_s."""
    deadline = time.monotonic() + timeout_s
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0.1))
        if process.is_alive():
            logger.error("%s did not exit after %g s: killing it", process.name, timeout_s)
            process.kill()
            process.join()


def run_api_server(spec: ApiServerSpec) -> None:
    """An API-server process: serves the HTTP API (and, the first one, the gRPC API) until SIGTERM (which
    drains), or until the engine's process is gone."""
    import prometheus_client

    from mtpserve.server.async_engine import AsyncEngine

    configure_logging(spec.frontend.log_level, prefix=f"api{spec.index} ")
    prometheus_client.disable_created_metrics()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the engine's process, which stops us
    engine = AsyncEngine(ApiServerCore(spec), **admission_limits(spec.frontend.options, spec.count))
    try:
        server = frontend_server(engine, spec.frontend, exit_signals=(signal.SIGTERM,))
        threading.Thread(target=_exit_without_engine, args=(engine, server), name="mtpserve-engine-watch",
                         daemon=True).start()
        server.run(sockets=[spec.sock])
    finally:
        engine.shutdown()


def _exit_without_engine(engine, server) -> None:
    """Ends this API server once the engine's process is gone (its open requests end with that error)."""
    while not server.should_exit:
        lost = engine.core.engine.lost
        if lost is not None:
            engine.fail(lost)
            server.exit_when_idle(grace_s=2.0)
            return
        time.sleep(0.5)
