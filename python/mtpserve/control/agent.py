"""A rank's side of the control plane: register, agree on the KV-block count, heartbeat."""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Callable

import grpc

from mtpserve.control import control_pb2 as pb
from mtpserve.control import control_pb2_grpc as pb_grpc
from mtpserve.control.master import HEARTBEAT_INTERVAL_S, TOKEN_METADATA_KEY
from mtpserve.distributed import parse_master_addr

logger = logging.getLogger("mtpserve.control")


class ControlError(RuntimeError):
    """The control plane refused this rank or could not be reached in time."""


class RankAgent:
    def __init__(self, master_node_addr: str, rank: int, world_size: int, token: str | None = None):
        host, port = parse_master_addr(master_node_addr)
        self._metadata = ((TOKEN_METADATA_KEY, token),) if token else None
        self.rank, self.world_size = rank, world_size
        self.target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._channel = grpc.insecure_channel(self.target)
        self._stub = pb_grpc.ControlStub(self._channel)
        self.stop_requested = threading.Event()  # the master said stop
        self.master_lost = threading.Event()  # no heartbeat reply for too long
        self.stop_reason = ""
        self._beats: threading.Thread | None = None
        self._closing = threading.Event()

    def _poll(self, call, request, what: str, done: Callable, timeout_s: float):
        deadline = time.monotonic() + timeout_s
        last_error = "no reply"
        while True:
            try:
                reply = call(request, timeout=5.0, metadata=self._metadata)
                if reply.error:
                    raise ControlError(f"{what}: {reply.error}")
                if done(reply):
                    return reply
            except grpc.RpcError as e:
                last_error = f"{e.code().name}: {e.details()}"
                if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INVALID_ARGUMENT):
                    raise ControlError(f"{what}: rank 0's control service refused it ({last_error}); is the "
                                       "cluster token the same on every rank?") from None
            if self.master_lost.is_set():  # heartbeats run: rank 0 was there and is gone
                raise ControlError(f"{what}: rank 0's control service at {self.target} is gone ({last_error})")
            if time.monotonic() > deadline:
                raise ControlError(f"{what}: gave up after {timeout_s:g} s waiting on rank 0's control service at "
                                   f"{self.target} ({last_error})")
            time.sleep(0.1)

    def register(self, timeout_s: float = 300.0) -> None:
        """Registers and waits until every rank has (the go-ahead to load)."""
        request = pb.RegisterRequest(rank=self.rank, world_size=self.world_size, pid=os.getpid(),
                                     hostname=socket.gethostname())
        self._poll(self._stub.Register, request, f"rank {self.rank}: registering", lambda r: r.all_registered,
                   timeout_s)

    def ready(self, max_blocks: int, shared_host_memory: bool = False, timeout_s: float = 600.0) -> int:
        """Reports how many KV blocks fit here (shared_host_memory: sized from host memory that the
        other ranks on this host share); returns the count every rank allocates."""
        request = pb.ReadyRequest(rank=self.rank, max_blocks=max_blocks, shared_host_memory=shared_host_memory)
        reply = self._poll(self._stub.Ready, request, f"rank {self.rank}: agreeing on the KV-cache size",
                           lambda r: r.num_blocks > 0, timeout_s)
        return reply.num_blocks

    def start_heartbeats(self, steps: Callable[[], int] = lambda: 0, lost_after_s: float = 3.0) -> None:
        """Beats every HEARTBEAT_INTERVAL_S; rank 0 counts as lost (master_lost) once no beat was
        answered for lost_after_s. Each beat waits at most lost_after_s / 2 for its reply and the
        clock is checked after every beat, so that a rank 0 that hangs (SIGSTOP: its sockets stay
        open) is noticed after 3-5 s rather than after several 2 s RPC timeouts."""
        def beat():
            last_ok = time.monotonic()
            while not self._closing.wait(HEARTBEAT_INTERVAL_S):
                try:
                    reply = self._stub.Heartbeat(pb.HeartbeatRequest(rank=self.rank, steps=steps()),
                                                 timeout=lost_after_s / 2, metadata=self._metadata)
                    last_ok = time.monotonic()
                    if reply.stop:
                        self.stop_reason = reply.error
                        self.stop_requested.set()
                except grpc.RpcError:
                    pass
                if time.monotonic() - last_ok > lost_after_s:
                    self.master_lost.set()

        self._beats = threading.Thread(target=beat, name="mtpserve-heartbeat", daemon=True)
        self._beats.start()

    def close(self) -> None:
        self._closing.set()
        if self._beats is not None:
            self._beats.join(3.0)
        self._channel.close()
