"""The order in which interleaved benchmark methods run in each repeat.

Whatever a run leaves behind (a GPU at its power cap after the heaviest method, a warm cache, a busy allocator)
falls on the run after it. A rotation (methods[r:] + methods[:r]) keeps every method's predecessor fixed but in the
one repeat where it runs first: on a GPU, offline, the adaptive policy ran after fixed k = 3, the heaviest method,
in most repeats of every run (docs/benchmarks.md, 2026-11-29, twenty-third session). Williams' Latin square balances
that: over `cycle(n)` repeats each method runs first equally often and directly after each other method equally
often (once in n repeats for an even n, twice in 2n for an odd n).
"""
from __future__ import annotations


def cycle(n: int) -> int:
    """Repeats after which the order is balanced: n for an even number of methods, 2n for an odd one."""
    return n if n % 2 == 0 else 2 * n


def balanced_order(items: list, repeat: int) -> list:
    """The methods `items` in repeat `repeat`'s order: row `repeat` of a Williams design, the odd repeats' rows
    reversed for an odd number of methods (so that 2 repeats already put each method both before and after its
    neighbours)."""
    n = len(items)
    if n <= 1:
        return list(items)
    if n % 2 == 0:
        row, reverse = repeat % n, False
    else:
        row, reverse = (repeat // 2) % n, repeat % 2 == 1
    # The first row: 0, 1, n - 1, 2, n - 2, ...; row r adds r to every index.
    first = [0] + [(j + 1) // 2 if j % 2 == 1 else n - j // 2 for j in range(1, n)]
    order = [items[(i + row) % n] for i in first]
    return order[::-1] if reverse else order
