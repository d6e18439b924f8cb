"""An MoE layer's routed experts stacked as the loader reads them, in the layout the C++ MoE takes:
[experts, 2 * inter, hidden] (gate rows, then up rows) and [experts, hidden, inter]. Each expert's
tensors are copied into their place as they arrive, so the weights never exist twice."""
from __future__ import annotations

import re

import torch

from mtpserve import _C

_EXPERT = re.compile(r"^(.*\.mlp\.)experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


class ExpertStacks:
    def __init__(self, names: list[str]):
        """`names`: every tensor the loader will read; the routed experts among them are counted per layer."""
        self.experts: dict[str, int] = {}
        self.expected: set[str] = set()
        for name in names:
            match = _EXPERT.match(name)
            if match:
                self.experts[match[1]] = max(self.experts.get(match[1], 0), int(match[2]) + 1)
        for prefix, count in self.experts.items():
            self.expected |= {f"{prefix}experts.{e}.{kind}.weight" for e in range(count)
                              for kind in ("gate_proj", "up_proj", "down_proj")}
        self.stacks: dict[str, torch.Tensor] = {}

    def place(self, name: str, tensor: torch.Tensor) -> bool:
        """Copies a routed expert's tensor into its stack; False for any other tensor."""
        match = _EXPERT.match(name)
        if match is None:
            return False
        prefix, expert, kind = match[1], int(match[2]), match[3]
        if kind == "down_proj":
            self._stack(_C.stacked_down(prefix), (self.experts[prefix], *tensor.shape), tensor, name)[expert] = tensor
        else:
            inter, hidden = tensor.shape
            stack = self._stack(_C.stacked_gate_up(prefix), (self.experts[prefix], 2 * inter, hidden), tensor, name)
            first = 0 if kind == "gate_proj" else inter
            stack[expert, first:first + inter] = tensor
        self.expected.discard(name)
        return True

    def finished(self) -> dict[str, torch.Tensor]:
        """The stacks, once every expert of every layer has all three tensors."""
        if self.expected:
            raise ValueError(f"checkpoint is missing tensor '{min(self.expected)}' (the routed experts of a layer "
                             "must all be present)")
        return self.stacks

    def _stack(self, key: str, shape: tuple, tensor: torch.Tensor, name: str) -> torch.Tensor:
        stack = self.stacks.get(key)
        if stack is None:
            stack = self.stacks[key] = torch.empty(shape, dtype=tensor.dtype, device=tensor.device)
        if tuple(stack.shape) != shape:
            raise ValueError(f"tensor '{name}' has shape {list(tensor.shape)}, unlike the layer's other experts")
        return stack
