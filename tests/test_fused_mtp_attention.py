"""The fused absorbed-MLA kernel (all (k + 1) x heads query rows of a sequence against its paged
latent KV in one pass) against a plain implementation that attends one query row at a time."""
import random

import pytest
import torch

from mtpserve import _C

HEADS, LORA, ROPE, BLOCK = 4, 32, 8, 4


def per_row_reference(q, cache, query_start, context_lens, tables, scale):
    """Row i of a sequence with context c and query length n sits at position c - n + i."""
    out = []
    rows = cache.view(-1, LORA + ROPE)
    for s, ctx in enumerate(context_lens):
        n = query_start[s + 1] - query_start[s]
        slots = [tables[s][p // BLOCK] * BLOCK + p % BLOCK for p in range(ctx)]
        keys = rows[slots]
        for i in range(n):
            visible = keys[: ctx - n + i + 1]
            for h in range(HEADS):
                weights = torch.softmax(visible @ q[query_start[s] + i, h] * scale, dim=0)
                out.append(weights @ visible[:, :LORA])
    return torch.stack(out).view(-1, HEADS, LORA)


@pytest.mark.parametrize("query_lens", [[1, 1, 1], [2, 2, 2, 2], [4, 1, 3, 4], [1], [20, 1, 3], [0, 2, 17]])
def test_fused_kernel_matches_per_row_attention(query_lens):
    rng = random.Random(len(query_lens))
    torch.manual_seed(sum(query_lens))
    blocks = list(range(64))
    rng.shuffle(blocks)
    context_lens = [rng.randrange(n, 30) for n in query_lens]
    tables = [[blocks.pop() for _ in range(-(-c // BLOCK))] for c in context_lens]
    width = max(len(t) for t in tables)
    cache = torch.randn(64, BLOCK, LORA + ROPE)
    query_start = [0]
    for n in query_lens:
        query_start.append(query_start[-1] + n)
    q = torch.randn(query_start[-1], HEADS, LORA + ROPE)
    scale = 0.17
    fused = _C.mla_attention(q, cache, torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
                             torch.tensor(query_start, dtype=torch.int32), torch.tensor(context_lens, dtype=torch.int32),
                             max(query_lens), max(context_lens), LORA, scale)
    expected = per_row_reference(q, cache, query_start, context_lens, tables, scale)
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-5)
