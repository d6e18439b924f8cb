"""Tensor-parallel process groups: one rank per process (rank = --node_rank, world size =
--nnodes), created with torch.distributed and handed to the C++ runtime by name. The model's
collectives run on the attention group (the world group unless --dp_size splits it; gloo on cpu,
nccl on cuda, one GPU per rank) and the expert all-to-alls on the world group; step plans are host
int64 tensors, which NCCL does not take, so on a GPU they travel on a gloo side group of the same
ranks (on the CPU the gloo groups carry both). Under data-parallel attention with expert parallelism
the groups' leaders also share a gloo group to agree on their steps (StepLockstep).

The c10d rendezvous uses a TCPStore on rank 0's host at the control-plane port + 1
(--master_node_addr host:port is the control gRPC service; host:port+1 is the store). Rank 0
binds the store to the master address only (not every interface, as c10d's own rendezvous
would); with a loopback master address gloo's pair sockets stay on loopback too.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from dataclasses import dataclass

from mtpserve import _C

# The collective backend of each device type (DESIGN §1: gloo on cpu, nccl on cuda, hccl on npu). On the
# NPU one group holds both: its NPU tensors (activations) go over HCCL, its CPU tensors (the step plans,
# a host side channel) over gloo.
BACKENDS = {"cpu": "gloo", "cuda": "nccl", "npu": "cpu:gloo,npu:hccl"}
# How long one collective may wait for its peers before the step fails. Peers that die are seen
# at once (their sockets close); this bounds a peer that hangs.
DEFAULT_TIMEOUT_S = float(os.environ.get("MTPSERVE_COLLECTIVE_TIMEOUT_S", "60"))


def parse_master_addr(addr: str | None) -> tuple[str, int]:
    """'host:port' (or '[v6]:port') -> (host, port), with clear errors."""
    if not addr:
        raise ValueError("--master_node_addr is required with --nnodes > 1 (host:port of rank 0's control service)")
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65535:
        raise ValueError(f"--master_node_addr={addr!r}: expected host:port with a port in 1..65534 "
                         "(port + 1 is used for the collective rendezvous)")
    return host.strip("[]"), int(port)


def store_port(master_port: int) -> int:
    return master_port + 1


@dataclass
class RankGroups:
    """This rank's place: its attention group's TensorParallel (the expert group included), which of the
    dp_size attention groups it belongs to, and, on a group's leader (its rank 0) under lockstep, the
    StepLockstep its engine agrees on steps with. `store` is the c10d rendezvous store (None on one rank)."""
    tp: object
    dp_rank: int = 0
    dp_size: int = 1
    lockstep: object = None
    store: object = None

    @property
    def leads_group(self) -> bool:
        """This rank runs its attention group's Engine (the others replay its plans)."""
        return self.tp.rank == 0


def init_tensor_parallel(rank: int, world_size: int, master_addr: str, device: str = "cpu",
                         timeout_s: float = DEFAULT_TIMEOUT_S, ep_size: int = 1) -> _C.TensorParallel:
    """init_groups() with one attention group: the world group as the runtime's TensorParallel."""
    return init_groups(rank, world_size, master_addr, device, timeout_s, ep_size).tp


def init_groups(rank: int, world_size: int, master_addr: str, device: str = "cpu",
                timeout_s: float = DEFAULT_TIMEOUT_S, ep_size: int = 1, dp_size: int = 1) -> RankGroups:
    """Joins the world group (every rank must call this) and splits it into dp_size attention groups of
    world_size / dp_size consecutive ranks, each tensor parallel inside; with ep_size == world_size the
    routed experts are expert-parallel over the whole world, and then the groups' leaders step in lockstep.
    One rank: no group, the default (size 1) TensorParallel."""
    check_parallel_sizes(world_size, ep_size, dp_size)
    if world_size == 1:
        return RankGroups(_C.TensorParallel())
    import torch
    import torch.distributed as dist

    host, port = parse_master_addr(master_addr)
    kind = device.split(":")[0]
    if kind not in BACKENDS:
        raise ValueError(f"no collective backend for device {device!r}")
    timeout = datetime.timedelta(seconds=timeout_s)
    if kind == "npu":
        import torch_npu  # noqa: F401  (registers the hccl backend; devices.py has checked it loads)
        torch.npu.set_device(device)
    if _is_loopback(host):  # every group has a gloo part (the step plans travel on gloo)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # every rank is local: gloo listens on loopback only
    if kind == "cuda":
        torch.cuda.set_device(device)  # NCCL binds this rank to its own GPU
    if rank == 0:
        listener = bind_store_socket(host, store_port(port))
        store = dist.TCPStore(host, store_port(port), world_size, True, timeout, wait_for_workers=False,
                              master_listen_fd=listener.detach())
    else:
        store = dist.TCPStore(host, store_port(port), world_size, False, timeout)
    dist.init_process_group(BACKENDS[kind], store=store, rank=rank, world_size=world_size, timeout=timeout)
    # Where the world group takes host tensors over gloo (cpu; npu's mixed backend) it carries the plans too.
    host_tensors = "gloo" in BACKENDS[kind]
    control = dist.group.WORLD if host_tensors else dist.new_group(backend="gloo", timeout=timeout)
    if kind == "cuda":
        check_distinct_gpus(device, control)
    experts = dist.group.WORLD.group_name if ep_size > 1 else ""
    if dp_size == 1:
        tp = _C.TensorParallel.from_group_names(dist.group.WORLD.group_name, control.group_name, timeout_s, experts)
        return RankGroups(tp, store=store)
    # Every rank creates every group, in the same order (torch.distributed requires it).
    size = world_size // dp_size
    ranks = [list(range(d * size, (d + 1) * size)) for d in range(dp_size)]
    data = [dist.new_group(r, backend=BACKENDS[kind], timeout=timeout) for r in ranks]
    plans = data if host_tensors else [dist.new_group(r, backend="gloo", timeout=timeout) for r in ranks]
    leaders = dist.new_group([r[0] for r in ranks], backend="gloo", timeout=timeout) if ep_size > 1 else None
    mine = rank // size
    tp = _C.TensorParallel.from_group_names(data[mine].group_name, plans[mine].group_name, timeout_s, experts)
    lockstep = (_C.StepLockstep.from_group_name(leaders.group_name, timeout_s)
                if leaders is not None and rank % size == 0 else None)
    return RankGroups(tp, mine, dp_size, lockstep, store)


def check_parallel_sizes(world_size: int, ep_size: int, dp_size: int = 1) -> None:
    """Expert parallelism spans the whole world; the attention groups split it evenly."""
    if ep_size < 1:
        raise ValueError(f"--ep_size must be >= 1, got {ep_size}")
    if ep_size not in (1, world_size):
        raise ValueError(f"--ep_size={ep_size} with --nnodes {world_size}: expert parallelism spans every rank, so "
                         f"--ep_size must be 1 or --nnodes ({world_size})")
    if dp_size < 1:
        raise ValueError(f"--dp_size must be >= 1, got {dp_size}")
    if world_size % dp_size:
        raise ValueError(f"--dp_size={dp_size} does not divide --nnodes {world_size}: the ranks form --dp_size "
                         f"attention groups of equal size; choose --dp_size among the divisors of {world_size}")


def check_distinct_gpus(device: str, control) -> None:
    """Refuses two ranks on one GPU (NCCL cannot run them) with a message naming the ranks."""
    import torch
    import torch.distributed as dist

    mine = (socket.gethostname(), str(torch.cuda.get_device_properties(torch.device(device)).uuid))
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (mine, device), group=control)
    for other, (gpu, other_device) in enumerate(everyone):
        if other != dist.get_rank() and gpu == mine:
            raise ValueError(f"rank {dist.get_rank()} ({device}) and rank {other} ({other_device}) are on the same "
                             f"GPU of {mine[0]}: give each rank its own GPU (--devices cuda:0,cuda:1,... with "
                             "--nnodes, or --devices cuda:i for --node_rank i)")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def bind_store_socket(host: str, port: int) -> socket.socket:
    """The rendezvous store's listening socket, bound to the master address only."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise OSError(f"cannot serve the collective rendezvous on {host}:{port}: {e.strerror or e}") from None
    return sock


def destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
