"""Running the HTTP server: `serve` for the `mtpserve serve` command, BackgroundServer to run an
app on a thread of this process (tests, notebooks)."""
from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from pathlib import Path

import uvicorn

from mtpserve.engine_args import EngineArgs

logger = logging.getLogger("mtpserve.server")


def serve(args: EngineArgs, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          served_model_name: str | None = None, log_level: str = "info", grpc_port: int = 0, nnodes: int = 1,
          master_node_addr: str | None = None) -> None:
    """Loads the engine, serves the OpenAI API (and the gRPC API when grpc_port is not 0, on the same
    event loop over the same engine) until SIGINT/SIGTERM, then shuts the engine down.

    nnodes > 1: this is rank 0 of a tensor-parallel group (mtpserve.ranks): it also runs the
    control service at master_node_addr, waits for the other ranks, and /health reports them."""
    from mtpserve.engine import EngineCore
    from mtpserve.server.app import build_app
    from mtpserve.server.async_engine import AsyncEngine

    import prometheus_client

    logging.basicConfig(level=log_level.upper() if log_level != "trace" else "DEBUG",
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    prometheus_client.disable_created_metrics()  # no *_created samples next to every counter
    name = served_model_name or Path(args.model).resolve().name
    ranks = None
    if nnodes > 1:
        from mtpserve.ranks import MasterRank

        ranks = MasterRank(args, nnodes, master_node_addr)
        engine = AsyncEngine(ranks.core)

        def on_rank_failure(reason: str) -> None:
            ranks.core.engine.fail(reason)  # no further collective; the engine ends its requests
            engine.fail(reason)  # and the streams end now, even if the engine is stuck in a collective

        ranks.serving(on_rank_failure)
    else:
        engine = AsyncEngine(EngineCore(args))
    try:
        app = build_app(engine, name, api_key=api_key, model_root=str(args.model),
                        health=ranks.health if ranks else None)
        logger.info("serving %s (max_model_len %d) on http://%s:%d", name, engine.max_model_len, host, port)
        grpc_server = None
        if grpc_port:
            from mtpserve.grpc_api.server import GrpcServer

            grpc_server = GrpcServer(engine, name, host=host, port=grpc_port, api_key=api_key,
                                     model_root=str(args.model), health=ranks.health if ranks else None)
        # grpc.aio is only known to be solid on asyncio's own loop, so no uvloop next to it.
        loop = {"loop": "asyncio"} if grpc_server else {}
        _Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5, **loop),
                grpc_server).run()
    finally:
        if ranks is None:
            engine.shutdown()
        else:
            _shutdown_ranks(engine, ranks)


def _shutdown_ranks(engine, ranks) -> None:
    """Rank 0's shutdown: the engine (which tells the workers to stop when the group is healthy),
    then the control service; bounded, since a hung peer could hold the engine in a collective."""
    from mtpserve.ranks import exit_now

    # A failed group may hold the engine in a collective with a hung peer until it times out:
    # nothing is left to save there, so it gets a short wait only.
    wait_s = 15.0 if ranks.health()[0] else 3.0
    done = threading.Thread(target=engine.shutdown, name="mtpserve-shutdown", daemon=True)
    done.start()
    done.join(wait_s)
    if done.is_alive():
        logger.error("the engine did not stop within %g s (a collective is stuck); exiting anyway", wait_s)
    ranks.stop()
    logger.info("rank 0: shut down")
    exit_now(0 if not done.is_alive() and ranks.health()[0] else 1)


class _Server(uvicorn.Server):
    """uvicorn's Server, except that SIGINT/SIGTERM end serve() and stay handled: uvicorn would
    re-raise the signal afterwards and kill the process before the engine is shut down. A gRPC
    server, if given, runs on the same event loop for as long as the HTTP server does."""

    def __init__(self, config: uvicorn.Config, grpc_server=None):
        super().__init__(config)
        self.grpc_server = grpc_server

    async def serve(self, sockets=None):
        if self.grpc_server is None:
            return await super().serve(sockets)
        try:
            await self.grpc_server.start()
        except OSError as e:
            logger.error("%s", e)
            raise SystemExit(1) from None
        logger.info("serving the gRPC API on %s", self.grpc_server.target)
        try:
            await super().serve(sockets)
        finally:
            await self.grpc_server.stop(grace=2.0)

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


class BackgroundServer:
    """uvicorn serving `app` on a thread; port 0 picks a free port (bound before start returns)."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"):
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.host, self.port = host, self._socket.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=2))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]},
                                        name="mtpserve-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout_s)
        self._socket.close()

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
