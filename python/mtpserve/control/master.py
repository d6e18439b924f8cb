"""Rank 0's Control service: registration, the KV-block agreement, heartbeats and stop.

A rank that stops heartbeating for HEARTBEAT_TIMEOUT_S once the group is serving (for
STARTUP_HEARTBEAT_TIMEOUT_S while the ranks load) is declared failed (on_failure is called once,
with the reason; Register/Ready then answer with the error, so that starting ranks give up);
heartbeats every HEARTBEAT_INTERVAL_S and a monitor tick of 0.2 s keep detection well within 5 s.
A monitor that was itself stalled (a long call holding the GIL) restarts the clocks instead of
blaming the ranks.

Hardening: the service binds the master address only. With a cluster token (MTPSERVE_CLUSTER_TOKEN
or --cluster_token_file on every rank) every RPC must carry it as the metadata
`x-mtpserve-cluster-token` (UNAUTHENTICATED otherwise). Every RPC's fields are checked before they
touch any state: the rank within the world size, Ready and Heartbeat only from a registered rank,
plausible block counts, no second opinion once the KV-block count is agreed; a refused RPC
changes nothing (INVALID_ARGUMENT, or the reply's error for Register/Ready).
"""
from __future__ import annotations

import logging
import secrets
import threading
import time
from concurrent import futures
from typing import Callable

import grpc

from mtpserve.control import control_pb2 as pb
from mtpserve.control import control_pb2_grpc as pb_grpc

logger = logging.getLogger("mtpserve.control")

HEARTBEAT_INTERVAL_S = 0.5
HEARTBEAT_TIMEOUT_S = 2.5
STARTUP_HEARTBEAT_TIMEOUT_S = 30.0
_MONITOR_TICK_S = 0.2
TOKEN_METADATA_KEY = "x-mtpserve-cluster-token"
MAX_PLAUSIBLE_BLOCKS = 1 << 40  # more KV blocks than any machine holds: a forged or corrupt count
_MAX_HOSTNAME = 255
# Linux's per-task flag for an exit under way (/proc/PID/stat field 9): it is set before the process's files, its
# sockets among them, are closed, so a rank whose death has just failed a collective already shows it, a moment
# before it is a zombie.
_PF_EXITING = 0x4


class ControlMaster(pb_grpc.ControlServicer):
    def __init__(self, world_size: int, heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S,
                 startup_heartbeat_timeout_s: float = STARTUP_HEARTBEAT_TIMEOUT_S, token: str | None = None):
        self.world_size = world_size
        self._token = token.encode() if token else None
        self.refused = 0  # RPCs refused (no or wrong token, impossible fields)
        self._agreed: int | None = None  # the KV-block count, once every rank was ready
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.startup_heartbeat_timeout_s = startup_heartbeat_timeout_s
        self.on_failure: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._ranks: dict[int, tuple[int, str]] = {}  # rank -> (pid, hostname)
        self._max_blocks: dict[int, tuple[int, bool]] = {}  # rank -> (blocks that fit, sized from host memory)
        self._last_beat: dict[int, float] = {}
        self._steps: dict[int, int] = {}
        self._beat_counts: dict[int, int] = {}
        self._serving = False  # heartbeats are judged from here on
        self._stopping = False
        self.failure: str | None = None
        self._server: grpc.Server | None = None
        self._monitor = threading.Thread(target=self._watch, name="mtpserve-control-monitor", daemon=True)
        self.address = ""

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self, host: str, port: int) -> "ControlMaster":
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.world_size + 4,
                                                              thread_name_prefix="mtpserve-control"))
        pb_grpc.add_ControlServicer_to_server(self, self._server)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = self._server.add_insecure_port(target)
        except RuntimeError as e:  # grpc raises RuntimeError when it cannot bind
            raise OSError(f"cannot serve the control plane on {target}: {e}") from None
        if bound == 0:
            raise OSError(f"cannot serve the control plane on {target}")
        self.address = target
        self._server.start()
        self._monitor.start()
        logger.info("control service on %s for %d ranks", target, self.world_size)
        return self

    def start_serving(self) -> None:
        """Every rank is up: from now on a missing heartbeat fails the group."""
        with self._lock:
            now = time.monotonic()
            self._last_beat = {rank: now for rank in self._ranks}
            self._serving = True

    def stop(self, grace_s: float = 3.0) -> None:
        """Tells every rank to stop (heartbeat replies), waits up to grace_s for them to go quiet,
        then stops the service."""
        with self._lock:
            self._stopping = True
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with self._lock:
                now = time.monotonic()
                alive = [r for r, t in self._last_beat.items() if r != 0 and now - t < 2 * HEARTBEAT_INTERVAL_S]
            if not alive:
                break
            time.sleep(0.1)
        if self._server is not None:
            self._server.stop(grace=0.5).wait(2.0)

    # ---- state --------------------------------------------------------------------------------

    def health(self) -> tuple[bool, str]:
        with self._lock:
            if self.failure:
                return False, self.failure
        return True, "ok"

    def dead_local_ranks(self) -> list[int]:
        """Registered ranks on this host whose process is gone (seen at once, without waiting for
        their heartbeats to time out)."""
        import os
        import socket

        here = socket.gethostname()
        with self._lock:
            ranks = sorted(self._ranks.items())
        dead = []
        for rank, (pid, host) in ranks:
            if host != here or pid == os.getpid():
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                dead.append(rank)
            except OSError:
                pass
            else:
                try:  # a zombie (launch's child not reaped yet) is gone too, as is a process whose exit has begun
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(") ", 1)[-1].split()
                    if fields[0] in ("Z", "X") or int(fields[6]) & _PF_EXITING:
                        dead.append(rank)
                except OSError:
                    pass
        return dead

    def beats(self, rank: int) -> int:
        """Heartbeats received from `rank` so far."""
        with self._lock:
            return self._beat_counts.get(rank, 0)

    def steps(self) -> dict[int, int]:
        with self._lock:
            return dict(self._steps)

    def fail(self, reason: str) -> None:
        with self._lock:
            if self.failure is not None:
                return
            self.failure = reason
        logger.error("%s", reason)
        if self.on_failure is not None:
            try:
                self.on_failure(reason)
            except Exception:
                logger.exception("the failure handler failed")

    # ---- RPCs ---------------------------------------------------------------------------------

    def _authorize(self, context) -> None:
        """Aborts the RPC (UNAUTHENTICATED) unless it carries the cluster token, when one is set."""
        if self._token is None:
            return
        given = dict(context.invocation_metadata() or ()).get(TOKEN_METADATA_KEY)
        if given is None or not secrets.compare_digest(str(given).encode(), self._token):
            with self._lock:
                self.refused += 1
            peer = context.peer() if hasattr(context, "peer") else "?"
            logger.warning("control plane: refused an RPC from %s without the right cluster token", peer)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong cluster token")

    def _refuse(self, context, message: str) -> None:
        with self._lock:
            self.refused += 1
        logger.warning("control plane: refused an RPC: %s", message)
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)

    def Register(self, request, context):
        self._authorize(context)
        if request.pid <= 0 or len(request.hostname) > _MAX_HOSTNAME:
            self._refuse(context, f"Register: implausible pid {request.pid} or hostname")
        if request.world_size != self.world_size:
            return pb.RegisterReply(error=f"rank {request.rank} was started with --nnodes={request.world_size}, "
                                          f"but rank 0 with --nnodes={self.world_size}")
        if not 0 <= request.rank < self.world_size:
            return pb.RegisterReply(error=f"--node_rank={request.rank} is outside 0..{self.world_size - 1}")
        with self._lock:
            if self.failure:
                return pb.RegisterReply(error=self.failure)
            known = self._ranks.get(request.rank)
            if known is not None and known[0] != request.pid:
                return pb.RegisterReply(error=f"rank {request.rank} is already registered (pid {known[0]} on "
                                              f"{known[1]}); is --node_rank duplicated?")
            if known is None:
                logger.info("rank %d registered (pid %d on %s)", request.rank, request.pid, request.hostname)
            self._ranks[request.rank] = (request.pid, request.hostname)
            self._last_beat[request.rank] = time.monotonic()
            return pb.RegisterReply(all_registered=len(self._ranks) == self.world_size)

    def Ready(self, request, context):
        self._authorize(context)
        if not 0 <= request.rank < self.world_size:
            self._refuse(context, f"Ready: rank {request.rank} is outside 0..{self.world_size - 1}")
        if not 1 <= request.max_blocks <= MAX_PLAUSIBLE_BLOCKS:
            self._refuse(context, f"Ready: rank {request.rank} reports an implausible {request.max_blocks} KV blocks")
        with self._lock:
            if self.failure:
                return pb.ReadyReply(error=self.failure)
            if request.rank not in self._ranks:
                return pb.ReadyReply(error=f"rank {request.rank} is not registered")
            report = (request.max_blocks, request.shared_host_memory)
            known = self._max_blocks.get(request.rank)
            if known is not None and known != report:  # a rank asks again with the same report only
                return pb.ReadyReply(error=f"rank {request.rank} reported {known[0]} KV blocks already")
            self._max_blocks[request.rank] = report
            self._last_beat[request.rank] = time.monotonic()
            if len(self._max_blocks) < self.world_size:
                return pb.ReadyReply(num_blocks=0)
            if self._agreed is None:
                self._agreed = self._agreed_blocks()
            return pb.ReadyReply(num_blocks=self._agreed)

    def _agreed_blocks(self) -> int:
        """The minimum over ranks of what fits, where ranks sizing from one host's shared memory get
        an equal part of it each."""
        per_host: dict[str, int] = {}
        for rank, (_, shared) in self._max_blocks.items():
            if shared:
                host = self._ranks[rank][1]
                per_host[host] = per_host.get(host, 0) + 1
        fits = [blocks // per_host[self._ranks[rank][1]] if shared else blocks
                for rank, (blocks, shared) in self._max_blocks.items()]
        return max(1, min(fits))

    def Heartbeat(self, request, context):
        self._authorize(context)
        if not 0 <= request.rank < self.world_size or request.steps < 0:
            self._refuse(context, f"Heartbeat: rank {request.rank} is outside 0..{self.world_size - 1} "
                                  f"(or negative steps)")
        with self._lock:
            registered = request.rank in self._ranks
        if not registered:
            self._refuse(context, f"Heartbeat: rank {request.rank} has not registered")
        with self._lock:
            self._last_beat[request.rank] = time.monotonic()
            self._steps[request.rank] = request.steps
            self._beat_counts[request.rank] = self._beat_counts.get(request.rank, 0) + 1
            return pb.HeartbeatReply(stop=self._stopping or self.failure is not None, error=self.failure or "")

    # ---- monitor ------------------------------------------------------------------------------

    def _watch(self) -> None:
        last_tick = time.monotonic()
        while True:
            time.sleep(_MONITOR_TICK_S)
            now = time.monotonic()
            stalled = now - last_tick > self.heartbeat_timeout_s / 2
            last_tick = now
            with self._lock:
                if self._stopping or self.failure is not None:
                    if self._stopping:
                        return
                    continue
                if stalled:  # this process did not run the monitor for a while: nobody could beat
                    self._last_beat = {rank: now for rank in self._last_beat}
                    continue
                # Before serving, only ranks that beat already (registered, heartbeats started) count.
                timeout = self.heartbeat_timeout_s if self._serving else self.startup_heartbeat_timeout_s
                late = sorted(r for r, t in self._last_beat.items() if r != 0 and now - t > timeout)
            if late:
                self.fail(f"rank {late[0]} stopped heartbeating (no heartbeat for more than {timeout:g} s): "
                          "the rank died or hangs")
