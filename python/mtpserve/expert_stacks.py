"""An MoE layer's routed experts stacked as the loader reads them, in the layout the C++ MoE takes:
[experts, 2 * inter, hidden] (gate rows, then up rows) and [experts, hidden, inter]. Each expert's
tensors are copied into their place as they arrive, so the weights never exist twice. Under expert
parallelism a rank stacks only its own experts, [rank * n / size, (rank + 1) * n / size)."""
from __future__ import annotations

import re

import torch

from mtpserve import _C

_EXPERT = re.compile(r"^(.*\.mlp\.)experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


class ExpertStacks:
    def __init__(self, names: list[str], ep_rank: int = 0, ep_size: int = 1):
        """`names`: every tensor the loader may read; the routed experts among them are counted per layer,
        and this rank (of ep_size) stacks its share of them."""
        total: dict[str, int] = {}
        for name in names:
            match = _EXPERT.match(name)
            if match:
                total[match[1]] = max(total.get(match[1], 0), int(match[2]) + 1)
        self.experts: dict[str, int] = {}  # experts this rank stacks, per layer
        self.first: dict[str, int] = {}
        self.expected: set[str] = set()
        for prefix, count in total.items():
            if count % ep_size:
                raise ValueError(f"--ep_size={ep_size} does not divide the {count} routed experts of {prefix[:-1]}; "
                                 "choose an expert-parallel size among their divisors")
            self.experts[prefix] = count // ep_size
            self.first[prefix] = ep_rank * self.experts[prefix]
            self.expected |= {f"{prefix}experts.{e}.{kind}.weight"
                              for e in range(self.first[prefix], self.first[prefix] + self.experts[prefix])
                              for kind in ("gate_proj", "up_proj", "down_proj")}
        self.stacks: dict[str, torch.Tensor] = {}

    def wanted(self, name: str) -> bool:
        """False for another rank's routed experts."""
        return not self.routed(name) or name in self.expected

    @staticmethod
    def routed(name: str) -> bool:
        return _EXPERT.match(name) is not None

    def place(self, name: str, tensor: torch.Tensor) -> bool:
        """Copies a routed expert's tensor into its stack; False for any other tensor."""
        match = _EXPERT.match(name)
        if match is None:
            return False
        prefix, expert, kind = match[1], int(match[2]) - self.first[match[1]], match[3]
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
