"""Running the HTTP server: `serve` for the `mtpserve serve` command, BackgroundServer to run an
app on a thread of this process (tests, notebooks)."""
from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

import uvicorn

from mtpserve.engine_args import EngineArgs
from mtpserve.server.frontend import (Frontend, FrontendServer, ServeOptions, admission_limits, configure_logging,
                                      frontend_server)

logger = logging.getLogger("mtpserve.server")


def model_root(model: str | None) -> str:
    """What the APIs show as a model's root: the directory's name, never a path of this machine."""
    return Path(str(model)).name if model else "model"


def bind_socket(host: str, port: int, what: str = "the HTTP API", reuse_port: bool = False) -> socket.socket:
    """A listening socket on host:port, so that a port in use is found before the model loads."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise ValueError(f"cannot serve {what} on {host}:{port}: {e.strerror or e} (is another server "
                         f"running there?)") from None
    sock.set_inheritable(True)
    return sock


def bind_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on host:port for the HTTP API, one per API server. Several share the port through
    SO_REUSEPORT, so that the kernel spreads new connections over them (by a hash of each connection's addresses):
    on one shared socket, the API server whose event loop wakes first accepts every connection waiting (asyncio
    accepts in a loop), and a burst of connections could all land on one process. The port is first bound without
    SO_REUSEPORT, so that a server already there is found, even one that shares its port the same way."""
    first = bind_socket(host, port)
    if count == 1:
        return [first]
    port = first.getsockname()[1]
    first.close()
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(bind_socket(host, port, reuse_port=True))
    except ValueError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def check_port_free(host: str, port: int, what: str) -> None:
    bind_socket(host, port, what).close()


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
    http_sockets = bind_sockets(host, port, api_server_count)
    if grpc_port:
        check_port_free(host, grpc_port, "the gRPC API")
    frontend = Frontend(served_model_name or Path(args.model).resolve().name, model_root(args.model), host, port,
                        api_key, log_level, grpc_port, options)
    try:
        if api_server_count > 1:
            from mtpserve.server.api_servers import serve_api_servers

            serve_api_servers(args, http_sockets, frontend)
        else:
            _serve_here(args, nnodes, master_node_addr, http_sockets[0], frontend)
    finally:
        for sock in http_sockets:
            sock.close()


def _serve_here(args: EngineArgs, nnodes: int, master_node_addr: str | None, http_socket: socket.socket,
                frontend: Frontend) -> None:
    """The engine and the APIs in this process."""
    from mtpserve.engine import EngineCore
    from mtpserve.server.async_engine import AsyncEngine

    options = frontend.options
    limits = admission_limits(options)
    ranks = None
    server: FrontendServer | None = None
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
