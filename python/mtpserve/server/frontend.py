"""One process's HTTP (and gRPC) API server over an AsyncEngine: what `mtpserve serve` runs beside its engine, and
what each of `--api_server_count`'s API-server processes runs (serve.py, api_servers.py)."""
from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass

import uvicorn

from mtpserve.server.tls import TlsFiles

logger = logging.getLogger("mtpserve.server")


@dataclass
class ServeOptions:
    """Limits and behaviour of `mtpserve serve` beyond the engine's own arguments."""
    max_queue_len: int | None = None  # requests waiting for their first output; more get 503
    max_queued_tokens: int | None = None  # prompt tokens of those; more get 503
    request_timeout_s: float | None = None  # every request is aborted after this
    max_body_bytes: int = 16 << 20  # larger HTTP bodies get 413
    shutdown_timeout_s: float = 30.0  # SIGTERM: running requests get this long to finish
    exit_on_rank_failure: bool = True  # rank 0 exits (code 1) once a failed group's requests are failed
    cluster_token: str | None = None  # required on every control-plane RPC (multi-rank)
    tls: TlsFiles | None = None  # HTTPS and a TLS gRPC API


@dataclass
class Frontend:
    """What an HTTP (and gRPC) API server needs besides its engine; picklable, for API-server processes."""
    name: str  # the served model name
    model_root: str
    host: str
    port: int
    api_key: str | None
    log_level: str
    grpc_port: int
    options: ServeOptions


def configure_logging(log_level: str, prefix: str = "") -> None:
    logging.basicConfig(level=log_level.upper() if log_level != "trace" else "DEBUG",
                        format=f"%(asctime)s %(levelname)s {prefix}%(name)s: %(message)s")


def admission_limits(options: ServeOptions, share: int = 1) -> dict:
    """The AsyncEngine's admission limits; `share` API servers each take their part of the queue limits."""
    part = lambda limit: None if limit is None else -(-limit // share)  # noqa: E731
    return dict(max_queue_len=part(options.max_queue_len), max_queued_tokens=part(options.max_queued_tokens),
                request_timeout_s=options.request_timeout_s)


def frontend_server(engine, frontend: Frontend, health=None,
                    exit_signals: tuple = (signal.SIGINT, signal.SIGTERM)) -> "FrontendServer":
    """The uvicorn server of the HTTP API over `engine` (an AsyncEngine), with the gRPC API on its event loop
    when frontend.grpc_port is set; run it with run(sockets=[...])."""
    from mtpserve.server.app import build_app

    options = frontend.options
    app = build_app(engine, frontend.name, api_key=frontend.api_key, model_root=frontend.model_root,
                    max_body_bytes=options.max_body_bytes, health=health)
    logger.info("serving %s (max_model_len %d) on %s://%s:%d", frontend.name, engine.max_model_len,
                "https" if options.tls else "http", frontend.host, frontend.port)
    grpc_server = None
    if frontend.grpc_port:
        from mtpserve.grpc_api.server import GrpcServer

        grpc_server = GrpcServer(engine, frontend.name, host=frontend.host, port=frontend.grpc_port,
                                 api_key=frontend.api_key, model_root=frontend.model_root, health=health,
                                 tls=options.tls)
    # grpc.aio is only known to be solid on asyncio's own loop, so no uvloop next to it.
    loop = {"loop": "asyncio"} if grpc_server else {}
    tls = dict(ssl_certfile=options.tls.certfile, ssl_keyfile=options.tls.keyfile) if options.tls else {}
    config = uvicorn.Config(app, host=frontend.host, port=frontend.port, log_level=frontend.log_level,
                            timeout_graceful_shutdown=5, **loop, **tls)
    return FrontendServer(config, grpc_server, engine, options.shutdown_timeout_s, exit_signals)


class FrontendServer(uvicorn.Server):
    """uvicorn's Server, except that SIGINT/SIGTERM end serve() and stay handled: uvicorn would
    re-raise the signal afterwards and kill the process before the engine is shut down. A gRPC
    server, if given, runs on the same event loop for as long as the HTTP server does."""

    def __init__(self, config: uvicorn.Config, grpc_server=None, engine=None, shutdown_timeout_s: float = 30.0,
                 exit_signals: tuple = (signal.SIGINT, signal.SIGTERM)):
        super().__init__(config)
        self.grpc_server, self.exit_signals = grpc_server, exit_signals
        self.engine, self.shutdown_timeout_s = engine, shutdown_timeout_s
        self._draining = False

    def handle_exit(self, sig, frame) -> None:
        """The first SIGINT/SIGTERM drains (see serve()); a second one exits at once."""
        if self._draining or self.engine is None or self.shutdown_timeout_s <= 0:
            return super().handle_exit(sig, frame)
        self._draining = True
        self.engine.drain()
        logger.info("draining: no new requests; %d open requests get up to %g s to finish (a second signal "
                    "exits now)", self.engine.num_open_streams, self.shutdown_timeout_s)
        self.exit_when_idle(self.shutdown_timeout_s)

    def exit_when_idle(self, grace_s: float) -> None:
        """Ends the server once no request is open, or after grace_s, failing what is left."""
        def wait() -> None:
            deadline = time.monotonic() + grace_s
            while self.engine.num_open_streams and time.monotonic() < deadline:
                time.sleep(0.05)
            left = self.engine.num_open_streams
            if left:
                logger.warning("%d requests were still running after %g s: ending them", left, grace_s)
                self.engine.fail_open(f"the server shut down before the request finished (it waited {grace_s:g} s "
                                      "for running requests)")
                deadline = time.monotonic() + 2.0  # their error responses are written
                while self.engine.num_open_streams and time.monotonic() < deadline:
                    time.sleep(0.05)
            self.should_exit = True

        threading.Thread(target=wait, name="mtpserve-drain", daemon=True).start()

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
        original = {sig: signal.signal(sig, self.handle_exit) for sig in self.exit_signals}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)
