"""Lays sequences out in a paged latent cache with shuffled (non-contiguous) blocks and builds
the per-step inputs the runtime's forward takes."""
from __future__ import annotations

import random

import torch


class PagedLayout:
    def __init__(self, num_blocks: int, block_size: int, seed: int = 0):
        self.block_size = block_size
        self.free = list(range(num_blocks))
        random.Random(seed).shuffle(self.free)
        self.tables: list[list[int]] = []
        self.lens: list[int] = []

    def add_sequence(self) -> int:
        self.tables.append([])
        self.lens.append(0)
        return len(self.tables) - 1

    def step(self, new_tokens: dict[int, int], position_offset: int = 0) -> dict:
        """Appends new_tokens[seq] tokens to each listed sequence; returns the forward's keyword args
        (positions are shifted by position_offset, as the MTP layer's are)."""
        positions, slots, query_start, context_lens, tables = [], [], [0], [], []
        for seq, count in new_tokens.items():
            start = self.lens[seq]
            self.lens[seq] += count
            while len(self.tables[seq]) * self.block_size < self.lens[seq]:
                self.tables[seq].append(self.free.pop())
            for pos in range(start, start + count):
                slots.append(self.tables[seq][pos // self.block_size] * self.block_size + pos % self.block_size)
                positions.append(pos + position_offset)
            query_start.append(query_start[-1] + count)
            context_lens.append(self.lens[seq])
            tables.append(self.tables[seq])
        width = max(len(t) for t in tables)
        return dict(
            positions=torch.tensor(positions),
            query_start=query_start,
            context_lens=context_lens,
            block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
            slot_mapping=torch.tensor(slots),
        )
