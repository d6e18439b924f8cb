"""One process per rank (rank = --node_rank, world size = --nnodes), DESIGN §1.

Rank 0 (the master) serves the APIs and runs the C++ Engine, which broadcasts every step's plan
to the other ranks over c10d; it also runs the Control service (proto/control.proto) at
--master_node_addr. Ranks 1..N-1 run a C++ Worker. With --dp_size D the ranks form D attention
groups of N / D ranks: the first rank of each group runs that group's Engine (rank 0's frontend
reaches the others through group_link.py) and the group's other ranks replay its plans. Start-up,
on every rank:

  register with the Control service (wait until all ranks have)  -> heartbeats start
  join the c10d group (gloo / nccl / hccl; TCPStore at the control port + 1)
  load this rank's shards; report the KV blocks that fit; allocate the agreed minimum
  rank 0: engine + HTTP/gRPC APIs;  others: Worker.run() until rank 0 sends shutdown

Failure: a rank that dies makes rank 0's next collective fail at once (its sockets close), and
a rank that stops heartbeating is declared failed by the Control service within
HEARTBEAT_TIMEOUT_S; either way the engine is failed (open requests end with the error, /health
turns 503) and never issues another collective. Workers exit when rank 0 tells them to, when
rank 0 is gone, or when their collective fails.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import NoReturn

from mtpserve.engine_args import EngineArgs

logger = logging.getLogger("mtpserve.ranks")

# How long an orderly worker waits for its C++ loop to end once told to stop.
_STOP_GRACE_S = 3.0


class MasterRank:
    """Rank 0's side: the Control service, this rank's agent, the c10d group, the EngineCore."""

    def __init__(self, args: EngineArgs, nnodes: int, master_node_addr: str, cluster_token: str | None = None):
        from mtpserve import distributed
        from mtpserve.control import ControlMaster, RankAgent
        from mtpserve.engine import EngineCore

        self._logged: set[str] = set()
        host, port = distributed.parse_master_addr(master_node_addr)
        self.master = ControlMaster(nnodes, token=cluster_token).start(host, port)
        self.agent = RankAgent(master_node_addr, 0, nnodes, token=cluster_token)
        try:
            logger.info("rank 0: waiting for %d ranks to register at %s", nnodes, master_node_addr)
            self.agent.register()
            groups = distributed.init_groups(0, nnodes, master_node_addr, args.device, ep_size=args.ep_size,
                                             dp_size=args.dp_size)
            self.core = EngineCore(args, tp=groups.tp, agree_num_blocks=self.agent.ready, lockstep=groups.lockstep)
            if groups.dp_size > 1:
                from mtpserve.data_parallel import DataParallelCore

                logger.info("rank 0: connecting to the engines of attention groups 1..%d", groups.dp_size - 1)
                self.core = DataParallelCore(self.core, groups.store, groups.dp_size)
            if args.enable_graph and args.device.startswith("cuda") and groups.tp.expert_parallel:
                logger.info("rank 0: CUDA graphs are off under expert parallelism: every step runs eagerly")
        except BaseException:
            self.master.fail("rank 0 failed to start")
            self.master.stop(grace_s=1.0)
            raise
        logger.info("rank 0: %d ranks ready, %d KV blocks each", nnodes, self.core.num_blocks)

    def serving(self, on_failure) -> None:
        """From now on a rank failure calls on_failure(reason) (once)."""
        self.master.on_failure = on_failure
        self.master.start_serving()

    def health(self) -> tuple[bool, str]:
        ok, reason = self.master.health()
        if not ok:
            return ok, reason
        error = self.core.engine.error()
        return (False, self.describe_failure(error)) if error else (True, "ok")

    def describe_failure(self, error: str) -> str:
        """What users are told when the group failed: which rank, in plain words; the backend's
        own text (gloo's, nccl's) goes to the log once."""
        if error.startswith("rank ") or error.startswith("the tensor-parallel group failed"):
            return error  # ours already
        if error not in self._logged:
            self._logged.add(error)
            logger.error("rank 0: the engine failed: %s", error)
        dead = self.master.dead_local_ranks()
        if dead:
            return (f"the tensor-parallel group failed: rank {dead[0]} is gone (its process exited); the "
                    "server cannot generate until the group is restarted")
        ok, reason = self.master.health()
        if not ok:
            return f"the tensor-parallel group failed: {reason}"
        return ("the tensor-parallel group failed: a collective between the ranks failed (a rank died or "
                "hangs; see the ranks' logs)")

    def stop(self) -> None:
        self.master.stop()
        self.agent.close()


def run_worker(args: EngineArgs, nnodes: int, node_rank: int, master_node_addr: str,
               log_level: str = "info", cluster_token: str | None = None) -> NoReturn:
    """Ranks 1..N-1: runs until the group stops, then ends the process (exit code 0 after an
    orderly shutdown by rank 0 or a stop request, 1 when the group failed). Under data-parallel attention
    the first rank of each attention group runs that group's engine for rank 0's frontend."""
    from mtpserve import distributed
    from mtpserve.control import RankAgent
    from mtpserve.engine import WorkerCore

    logging.basicConfig(level=log_level.upper() if log_level != "trace" else "DEBUG",
                        format=f"%(asctime)s %(levelname)s rank{node_rank} %(name)s: %(message)s")
    agent = RankAgent(master_node_addr, node_rank, nnodes, token=cluster_token)
    logger.info("rank %d: registering with %s", node_rank, master_node_addr)
    agent.register()
    core = None
    agent.start_heartbeats(steps=lambda: core.steps if core is not None else 0)
    groups = distributed.init_groups(node_rank, nnodes, master_node_addr, args.device, ep_size=args.ep_size,
                                     dp_size=args.dp_size)
    if groups.leads_group:  # another attention group's engine, serving rank 0's frontend
        from mtpserve.engine import EngineCore
        from mtpserve.group_link import GroupLeaderCore

        core = GroupLeaderCore(EngineCore(args, groups.tp, agent.ready, groups.lockstep), groups.dp_rank,
                               groups.store, distributed.parse_master_addr(master_node_addr)[0])
        logger.info("rank %d: ready (%d KV blocks), running attention group %d's engine", node_rank, core.num_blocks,
                    groups.dp_rank)
    else:
        core = WorkerCore(args, groups.tp, agent.ready)
        logger.info("rank %d: ready (%d KV blocks), running its group leader's steps", node_rank, core.num_blocks)
    # Until here a signal simply ends the process; from here on it ends the loop below.
    stop_signal = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop_signal.set())

    outcome: dict[str, object] = {}

    def loop():
        try:
            core.run()
            outcome["ok"] = True
        except Exception as e:  # a collective failed: a peer died or timed out
            outcome["error"] = f"{type(e).__name__}: {e}"

    thread = threading.Thread(target=loop, name="mtpserve-worker", daemon=True)
    thread.start()
    stop_since = None
    while thread.is_alive():
        thread.join(0.2)
        why = _stop_reason(agent, stop_signal)
        if why and stop_since is None:
            logger.info("rank %d: stopping (%s)", node_rank, why)
            stop_since = time.monotonic()
        # Rank 0 gone: nothing can end the C++ loop's wait for its next step, so no grace.
        if stop_since is not None and (stop_signal.is_set() or agent.master_lost.is_set()
                                       or time.monotonic() - stop_since > _STOP_GRACE_S):
            break
    agent.close()
    if outcome.get("ok"):
        logger.info("rank %d: shut down by rank 0", node_rank)
        code = 0
    elif "error" in outcome:
        logger.error("rank %d: the tensor-parallel group failed: %s", node_rank, outcome["error"])
        code = 1
    else:
        code = 0 if stop_signal.is_set() or agent.stop_requested.is_set() else 1
    exit_now(code)


def _stop_reason(agent, stop_signal: threading.Event) -> str | None:
    if stop_signal.is_set():
        return "a signal"
    if agent.stop_requested.is_set():
        return "rank 0 said stop" + (f": {agent.stop_reason}" if agent.stop_reason else "")
    if agent.master_lost.is_set():
        return "rank 0's control service is gone"
    return None


def exit_now(code: int) -> NoReturn:
    """Ends a rank process without running interpreter teardown, which could wait on collective
    threads of a broken group; logs and output streams are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
