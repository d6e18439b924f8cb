"""Running the HTTP server: `serve` for the `mtpserve serve` command, BackgroundServer to run an
app on a thread of this process (tests, notebooks)."""
from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from mtpserve.engine_args import EngineArgs
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


def model_root(model: str | None) -> str:
    """What the APIs show as a model's root: the directory's name, never a path of this machine."""
    return Path(str(model)).name if model else "model"


def bind_socket(host: str, port: int, what: str = "the HTTP API") -> socket.socket:
    """A listening socket on host:port, so that a port in use is found before the model loads."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise ValueError(f"cannot serve {what} on {host}:{port}: {e.strerror or e} (is another server "
                         f"running there?)") from None
    sock.set_inheritable(True)
    return sock


def check_port_free(host: str, port: int, what: str) -> None:
    bind_socket(host, port, what).close()


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


def serve(args: EngineArgs, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          served_model_name: str | None = None, log_level: str = "info", grpc_port: int = 0, nnodes: int = 1,
          master_node_addr: str | None = None, options: ServeOptions | None = None,
          api_server_count: int = 1) -> None:
    """Loads the engine, serves the OpenAI API (and the gRPC API when grpc_port is not 0, on the same
    event loop over the same engine) until SIGINT/SIGTERM, then shuts the engine down.

    The ports are bound (HTTP) or checked (gRPC) before the model loads: a port in use fails at
    once. SIGTERM drains: no new requests (503, /health "draining"), running ones get
    options.shutdown_timeout_s to finish, the rest end with an error; a second signal exits now.

    nnodes > 1: this is rank 0 of a tensor-parallel group (mtpserve.ranks): it also runs the
    control service at master_node_addr, waits for the other ranks, and /health reports them.
    api_server_count > 1: the APIs are served by that many processes before this process's engine
    (server/api_servers.py)."""
    import prometheus_client

    options = options or ServeOptions()
    configure_logging(log_level)
    prometheus_client.disable_created_metrics()  # no *_created samples next to every counter
    http_socket = bind_socket(host, port)
    if grpc_port:
        check_port_free(host, grpc_port, "the gRPC API")
    frontend = Frontend(served_model_name or Path(args.model).resolve().name, model_root(args.model), host, port,
                        api_key, log_level, grpc_port, options)
    try:
        if api_server_count > 1:
            from mtpserve.server.api_servers import serve_api_servers

            serve_api_servers(args, api_server_count, http_socket, frontend)
        else:
            _serve_here(args, nnodes, master_node_addr, http_socket, frontend)
    finally:
        http_socket.close()


def configure_logging(log_level: str, prefix: str = "") -> None:
    logging.basicConfig(level=log_level.upper() if log_level != "trace" else "DEBUG",
                        format=f"%(asctime)s %(levelname)s {prefix}%(name)s: %(message)s")


def admission_limits(options: ServeOptions, share: int = 1) -> dict:
    """The AsyncEngine's admission limits; `share` API servers each take their part of the queue limits."""
    part = lambda limit: None if limit is None else -(-limit // share)  # noqa: E731
    return dict(max_queue_len=part(options.max_queue_len), max_queued_tokens=part(options.max_queued_tokens),
                request_timeout_s=options.request_timeout_s)


def _serve_here(args: EngineArgs, nnodes: int, master_node_addr: str | None, http_socket: socket.socket,
                frontend: Frontend) -> None:
    """The engine and the APIs in this process."""
    from mtpserve.engine import EngineCore
    from mtpserve.server.async_engine import AsyncEngine

    options = frontend.options
    limits = admission_limits(options)
    ranks = None
    server: _Server | None = None
    if nnodes > 1:
        from mtpserve.ranks import MasterRank

        ranks = MasterRank(args, nnodes, master_node_addr, cluster_token=options.cluster_token)
        engine = AsyncEngine(ranks.core, **limits)
        engine.describe_failure = ranks.describe_failure

        def on_rank_failure(reason: str) -> None:
            reason = ranks.describe_failure(reason)
            ranks.core.engine.fail(reason)  # no further collective; the engine ends its requests
            engine.fail(reason)  # and the streams end now, even if the engine is stuck in a collective
            if options.exit_on_rank_failure and server is not None:
                logger.error("rank 0: exiting, so that a supervisor can restart the group "
                             "(--exit_on_rank_failure=false keeps this rank up, answering 503)")
                server.exit_when_idle(grace_s=2.0)

        ranks.serving(on_rank_failure)
    else:
        engine = AsyncEngine(EngineCore(args), **limits)
    try:
        server = frontend_server(engine, frontend, health=ranks.health if ranks else None)
        if ranks is not None and not ranks.health()[0] and options.exit_on_rank_failure:
            server.exit_when_idle(grace_s=2.0)  # the group failed while this was being set up
        server.run(sockets=[http_socket])
    finally:
        if ranks is None:
            engine.shutdown()
        else:
            _shutdown_ranks(engine, ranks)


def frontend_server(engine, frontend: Frontend, health=None,
                    exit_signals: tuple = (signal.SIGINT, signal.SIGTERM)) -> "_Server":
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
    return _Server(config, grpc_server, engine, options.shutdown_timeout_s, exit_signals)


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
