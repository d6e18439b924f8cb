"""The rank control plane in one process: registration (and its refusals), the KV-block
agreement, heartbeats and the failure of a rank that stops beating."""
import os
import threading

import pytest

from servers import wait_for

from mtpserve.control import ControlMaster, RankAgent
from mtpserve.control import control_pb2 as pb
from mtpserve.control.agent import ControlError
from mtpserve.launch import free_port_pair


@pytest.fixture
def master():
    port = free_port_pair()
    m = ControlMaster(world_size=2, heartbeat_timeout_s=2.5).start("127.0.0.1", port)
    m.addr = f"127.0.0.1:{port}"
    yield m
    m.stop(grace_s=0.5)


def register_together(*agents):
    """Registers every agent at once (registration waits for the whole world), boundedly."""
    threads = [threading.Thread(target=a.register, kwargs={"timeout_s": 10}) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)


def test_register_ready_heartbeat_and_failure(master):
    failures = []
    rank0, rank1 = RankAgent(master.addr, 0, 2), RankAgent(master.addr, 1, 2)
    with pytest.raises(ControlError, match="gave up"):  # rank 1 is not there yet
        rank0.register(timeout_s=0.3)
    register_together(rank0, rank1)
    blocks = {}
    threads = [threading.Thread(target=lambda a=a, n=n: blocks.__setitem__(a.rank, a.ready(n, timeout_s=10)))
               for a, n in ((rank0, 120), (rank1, 80))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert blocks == {0: 80, 1: 80}  # the minimum that fits on every rank
    assert rank1.ready(80, timeout_s=5) == 80  # asked again with the same report: the same answer
    with pytest.raises(ControlError, match="reported 80 KV blocks already"):  # no second opinion once agreed
        rank1.ready(1, timeout_s=5)

    master.on_failure = failures.append
    master.start_serving()
    rank1.start_heartbeats(steps=lambda: 7)
    # Beats keep rank 1 alive past the timeout: wait for beats spanning more than it (counted, not
    # slept), without a failure.
    wait_for(lambda: master.beats(1) >= 2 + master.heartbeat_timeout_s / 0.5, "rank 1's heartbeats")
    assert master.health() == (True, "ok") and master.steps()[1] == 7
    rank1.close()  # rank 1 goes silent
    wait_for(lambda: not master.health()[0], "rank 1 to be declared dead")
    ok, reason = master.health()
    assert not ok and "rank 1 stopped heartbeating" in reason
    # The master records the failure, then calls the handler outside its lock: wait for the call.
    wait_for(lambda: failures, "the failure handler's call")
    assert failures == [reason]
    rank0.close()


def test_shared_host_memory_is_split_among_its_ranks(master):
    rank0, rank1 = RankAgent(master.addr, 0, 2), RankAgent(master.addr, 1, 2)
    register_together(rank0, rank1)
    # Ranks sizing from one host's shared RAM get an equal part of it.
    got = []
    other = threading.Thread(target=lambda: got.append(rank1.ready(200, True, timeout_s=10)), daemon=True)
    other.start()
    assert rank0.ready(120, shared_host_memory=True, timeout_s=10) == 60  # min(120 / 2, 200 / 2)
    other.join(15)
    assert got == [60]
    rank0.close()
    rank1.close()


def test_registration_refusals(master):
    with pytest.raises(ControlError, match="--nnodes=3"):
        RankAgent(master.addr, 1, 3).register(timeout_s=5)
    with pytest.raises(ControlError, match="outside 0..1"):
        RankAgent(master.addr, 5, 2).register(timeout_s=5)
    first = RankAgent(master.addr, 1, 2)
    with pytest.raises(ControlError):
        first.register(timeout_s=0.2)  # registered, still waiting for rank 0
    # Another process claiming rank 1 (a duplicated --node_rank) is refused.
    reply = first._stub.Register(pb.RegisterRequest(rank=1, world_size=2, pid=os.getpid() + 1, hostname="x"))
    assert "already registered" in reply.error


def test_stop_tells_ranks_to_stop(master):
    agent = RankAgent(master.addr, 1, 2)
    threading.Thread(target=lambda: RankAgent(master.addr, 0, 2).register(timeout_s=10), daemon=True).start()
    agent.register(timeout_s=10)
    agent.start_heartbeats()
    threading.Thread(target=master.stop, kwargs={"grace_s": 2.0}, daemon=True).start()
    assert agent.stop_requested.wait(5)
    agent.close()


def test_a_rank_lost_while_starting_fails_the_start():
    port = free_port_pair()
    master = ControlMaster(world_size=3, startup_heartbeat_timeout_s=0.8).start("127.0.0.1", port)
    try:
        addr = f"127.0.0.1:{port}"
        with pytest.raises(ControlError):
            RankAgent(addr, 1, 3).register(timeout_s=0.2)  # registered, then never heard of again
        with pytest.raises(ControlError, match="rank 1 stopped heartbeating"):
            RankAgent(addr, 0, 3).register(timeout_s=10)  # rank 0 gives up instead of waiting for rank 2
    finally:
        master.stop(grace_s=0.5)


def test_committed_control_stubs_are_up_to_date(tmp_path):
    """python/mtpserve/control/control_pb2*.py are what scripts/gen_proto.sh control writes from
    proto/control.proto (needs the pinned grpcio-tools, else skipped)."""
    import importlib.metadata
    import re
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("grpc_tools")
    root = Path(__file__).resolve().parents[1]
    script = root / "scripts/gen_proto.sh"
    pinned = re.search(r"^GRPCIO_TOOLS_VERSION=(\S+)$", script.read_text(), re.M).group(1)
    if importlib.metadata.version("grpcio-tools") != pinned:
        pytest.skip(f"needs grpcio-tools=={pinned}")
    out = tmp_path / "gen"
    subprocess.run(["bash", str(script), "control", str(out)], check=True, cwd=root, capture_output=True,
                   env={**os.environ, "PYTHON": sys.executable})
    committed = root / "python/mtpserve/control"
    for name in ("control_pb2.py", "control_pb2_grpc.py"):
        assert (out / name).read_text() == (committed / name).read_text(), \
            f"{name} is stale: run scripts/gen_proto.sh control and commit the stubs"


def _forge(master, call: str, request, token: str | None = None):
    import grpc

    from mtpserve.control import control_pb2_grpc as pb_grpc
    from mtpserve.control.master import TOKEN_METADATA_KEY

    with grpc.insecure_channel(master.addr) as channel:
        stub = pb_grpc.ControlStub(channel)
        metadata = ((TOKEN_METADATA_KEY, token),) if token else None
        return getattr(stub, call)(request, timeout=10, metadata=metadata)


def test_forged_heartbeats_and_ready_change_nothing(master):
    """Issue 17: one Heartbeat(rank=7) from any local client used to fail the whole group."""
    import grpc

    rank0, rank1 = RankAgent(master.addr, 0, 2), RankAgent(master.addr, 1, 2)
    register_together(rank0, rank1)
    master.start_serving()
    rank1.start_heartbeats()
    for rank in (7, -1, 2):  # outside the world
        with pytest.raises(grpc.RpcError) as e:
            _forge(master, "Heartbeat", pb.HeartbeatRequest(rank=rank))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for blocks in (0, -5, 1 << 50):  # implausible block counts
        with pytest.raises(grpc.RpcError) as e:
            _forge(master, "Ready", pb.ReadyRequest(rank=1, max_blocks=blocks))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError):
        _forge(master, "Ready", pb.ReadyRequest(rank=9, max_blocks=10))
    assert 7 not in master.steps() and master.refused == 7
    # Well past the heartbeat timeout, nothing was declared dead.
    wait_for(lambda: master.beats(1) >= 2 + master.heartbeat_timeout_s / 0.5, "rank 1's heartbeats")
    assert master.health() == (True, "ok")
    rank1.close()
    rank0.close()


def test_heartbeat_before_registering_is_refused(master):
    import grpc

    with pytest.raises(grpc.RpcError) as e:
        _forge(master, "Heartbeat", pb.HeartbeatRequest(rank=1))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "has not registered" in e.value.details()


def test_cluster_token_is_required_on_every_rpc():
    import grpc

    port = free_port_pair()
    master = ControlMaster(world_size=2, token="s3cret").start("127.0.0.1", port)
    master.addr = f"127.0.0.1:{port}"
    try:
        for call, request in (("Register", pb.RegisterRequest(rank=1, world_size=2, pid=1, hostname="x")),
                              ("Ready", pb.ReadyRequest(rank=1, max_blocks=10)),
                              ("Heartbeat", pb.HeartbeatRequest(rank=1))):
            for token in (None, "wrong"):
                with pytest.raises(grpc.RpcError) as e:
                    _forge(master, call, request, token)
                assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(ControlError, match="cluster token"):  # an agent without it gives up at once
            RankAgent(master.addr, 1, 2).register(timeout_s=30)
        assert master.steps() == {} and master.refused == 7
        # With the token: registration works.
        threading.Thread(target=lambda: RankAgent(master.addr, 0, 2, token="s3cret").register(timeout_s=10),
                         daemon=True).start()
        RankAgent(master.addr, 1, 2, token="s3cret").register(timeout_s=10)
    finally:
        master.stop(grace_s=0.5)


def test_a_hung_master_is_noticed(master):
    """A rank 0 that hangs with its sockets open (SIGSTOP) used to be noticed after ~10 s of
    stacked 2 s RPC timeouts; beats now give up after half the loss window (bounded wait here)."""
    agent = RankAgent(master.addr, 1, 2)
    threading.Thread(target=lambda: RankAgent(master.addr, 0, 2).register(timeout_s=10), daemon=True).start()
    agent.register(timeout_s=10)
    master._lock.acquire()  # every RPC of the master now blocks: a hung process with open sockets
    try:
        agent.start_heartbeats()
        assert agent.master_lost.wait(60)
    finally:
        master._lock.release()
        agent.close()
