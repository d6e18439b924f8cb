"""FP8 (e4m3) block-quantized checkpoint weights: one inverse scale per 128 x 128 block."""
from __future__ import annotations

import torch

BLOCK = 128
SCALE_SUFFIX = "_scale_inv"


def dequantize(name: str, weight: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
    """Returns weight * scale_inv in float32, each scale covering its 128 x 128 block."""
    rows, cols = weight.shape
    expected = (-(-rows // BLOCK), -(-cols // BLOCK))
    if tuple(scale_inv.shape) != expected:
        raise ValueError(f"tensor '{name}{SCALE_SUFFIX}' has shape {list(scale_inv.shape)}, "
                         f"expected {list(expected)} for weight shape {[rows, cols]}")
    scale = scale_inv.float().repeat_interleave(BLOCK, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :cols]
    return weight.float() * scale


def is_fp8(tensor: torch.Tensor) -> bool:
    return tensor.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
