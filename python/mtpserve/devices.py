"""Which device a rank runs on: --devices auto|cpu|cuda[:N]|npu[:N], checked at start-up against what is
really there, so a wrong choice fails before any weight is read, with a message naming what was found."""
from __future__ import annotations

import importlib.util
import logging

import torch

from mtpserve import _C

logger = logging.getLogger("mtpserve")


class DeviceError(ValueError):
    """The requested device does not exist here or this build cannot run on it."""


def rank_device(spec: str, node_rank: int, nnodes: int) -> str:
    """The --devices of rank node_rank: with a list of one device per rank (--nnodes 2 --devices
    cuda:0,cuda:1), the rank's own entry; any other spec as it is."""
    if "," not in spec:
        return spec
    devices = [d.strip() for d in spec.split(",")]
    if len(devices) != nnodes:
        raise DeviceError(f"devices={spec!r} lists {len(devices)} devices for --nnodes {nnodes}: list one per rank")
    return devices[node_rank]


def resolve_device(spec: str) -> str:
    """The torch device string of this rank. 'auto' picks an NPU where torch_npu sees one, else the first
    GPU, else the CPU, and logs the choice."""
    spec = spec.strip()
    if "," in spec:
        raise DeviceError(f"devices={spec!r}: one device per rank process; list one device per rank only with "
                          "--nnodes (--nnodes 2 --devices cuda:0,cuda:1), or give each rank its own "
                          "(--nnodes N --node_rank i --devices cuda:i)")
    if spec == "auto":
        device = _auto()
        logger.info("devices=auto: running on %s", device)
        return device
    kind, _, index = spec.partition(":")
    if kind == "cpu" and not index:
        return "cpu"
    if kind == "cuda":
        return _cuda(spec, int(index) if index.isdigit() else 0 if not index else -1)
    if kind == "npu":
        return _npu(spec, int(index) if index.isdigit() else 0 if not index else -1)
    raise DeviceError(f"devices={spec!r}: unknown device (choose auto, cpu, cuda:N or npu:N)")


def _auto() -> str:
    if _npu_visible():
        return "npu:0"
    if torch.cuda.is_available() and _C.has_cuda_kernels:
        return "cuda:0"
    if torch.cuda.is_available():
        logger.warning("devices=auto: a GPU is present but this mtpserve build has no CUDA kernels; running on cpu")
    return "cpu"


def _cuda(spec: str, index: int) -> str:
    if index < 0:
        raise DeviceError(f"devices={spec!r}: expected cuda or cuda:N with N a GPU index")
    if torch.version.cuda is None:
        raise DeviceError(f"devices={spec!r}: the installed torch {torch.__version__} has no CUDA support")
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceError(f"devices={spec!r}: torch sees {count} GPU(s)" +
                          (f" (cuda:0..cuda:{count - 1})" if count else ""))
    if not _C.has_cuda_kernels:
        raise DeviceError(f"devices={spec!r}: this mtpserve build has no CUDA kernels (rebuild where nvcc is on "
                          "PATH: bash scripts/setup.sh)")
    return f"cuda:{index}"


def _npu(spec: str, index: int) -> str:
    if index < 0:
        raise DeviceError(f"devices={spec!r}: expected npu or npu:N with N an NPU index")
    _import_torch_npu(spec)
    count = torch.npu.device_count()
    if index >= count:
        raise DeviceError(f"devices={spec!r}: torch_npu sees {count} NPU(s)" +
                          (f" (npu:0..npu:{count - 1})" if count else ""))
    return f"npu:{index}"


def _import_torch_npu(spec: str) -> None:
    """Imports torch_npu, which registers torch.npu, the 'npu' device, its ops (the NPU kernels call them by
    schema name) and the hccl backend; without CANN its import fails."""
    if importlib.util.find_spec("torch_npu") is None:
        raise DeviceError(f"devices={spec!r}: Ascend NPUs need torch_npu and the CANN toolkit (CANN >= 8.1.RC1), "
                          "and torch_npu is not installed")
    try:
        import torch_npu  # noqa: F401
    except Exception as e:  # noqa: BLE001  (a missing CANN shows as ImportError or OSError, among others)
        first_line = (str(e).splitlines() or [type(e).__name__])[0]
        raise DeviceError(f"devices={spec!r}: torch_npu is installed but does not load ({first_line}); it needs "
                          "the CANN toolkit (CANN >= 8.1.RC1): source /usr/local/Ascend/ascend-toolkit/set_env.sh")


def _npu_visible() -> bool:
    if importlib.util.find_spec("torch_npu") is None:
        return False
    try:
        _import_torch_npu("auto")
    except DeviceError:
        return False
    return torch.npu.is_available()
