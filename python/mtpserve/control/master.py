"""Rank 0's Control service: registration, the KV-block agreement, heartbeats and stop.

A rank that stops heartbeating for HEARTBEAT_TIMEOUT_S once the group is serving (for
STARTUP_HEARTBEAT_TIMEOUT_S while the ranks load) is declared failed (on_failure is called once,
with the reason; Register/Ready then answer with the error, so that starting ranks give up);
heartbeats every HEARTBEAT_INTERVAL_S and a monitor tick of 0.2 s keep detection well within 5 s.
A monitor that was itself stalled (a long call holding the GIL) restarts the clocks instead of
blaming the ranks.
"""
from __future__ import annotations

import logging
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


class ControlMaster(pb_grpc.ControlServicer):
    def __init__(self, world_size: int, heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S,
                 startup_heartbeat_timeout_s: float = STARTUP_HEARTBEAT_TIMEOUT_S):
        self.world_size = world_size
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.startup_heartbeat_timeout_s = startup_heartbeat_timeout_s
        self.on_failure: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._ranks: dict[int, tuple[int, str]] = {}  # rank -> (pid, hostname)
        self._max_blocks: dict[int, tuple[int, bool]] = {}  # rank -> (blocks that fit, sized from host memory)
        self._last_beat: dict[int, float] = {}
        self._steps: dict[int, int] = {}
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

    def Register(self, request, context):
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
        with self._lock:
            if self.failure:
                return pb.ReadyReply(error=self.failure)
            if request.rank not in self._ranks:
                return pb.ReadyReply(error=f"rank {request.rank} is not registered")
            self._max_blocks[request.rank] = (request.max_blocks, request.shared_host_memory)
            self._last_beat[request.rank] = time.monotonic()
            if len(self._max_blocks) < self.world_size:
                return pb.ReadyReply(num_blocks=0)
            return pb.ReadyReply(num_blocks=self._agreed_blocks())

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
        with self._lock:
            self._last_beat[request.rank] = time.monotonic()
            self._steps[request.rank] = request.steps
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
