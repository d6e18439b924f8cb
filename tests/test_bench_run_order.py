"""The benchmarks' interleaving order: every method runs first, and directly after every other method, equally often
over a cycle of repeats (a rotation fails this: a method's predecessor never changes but when it runs first)."""
from collections import Counter

import pytest

from mtpserve.bench.run_order import balanced_order, cycle


@pytest.mark.parametrize("n", range(1, 9))
def test_each_repeat_runs_every_method_once(n):
    methods = [f"m{i}" for i in range(n)]
    for repeat in range(3 * cycle(n)):
        assert sorted(balanced_order(methods, repeat)) == sorted(methods)


@pytest.mark.parametrize("n", range(2, 9))
def test_over_a_cycle_each_method_follows_each_other_equally_often(n):
    methods = list(range(n))
    rows = [balanced_order(methods, repeat) for repeat in range(cycle(n))]
    follows = Counter((row[j], row[j + 1]) for row in rows for j in range(n - 1))
    assert set(follows) == {(a, b) for a in methods for b in methods if a != b}
    assert len(set(follows.values())) == 1
    firsts = Counter(row[0] for row in rows)
    assert set(firsts) == set(methods) and len(set(firsts.values())) == 1


def test_three_methods_in_three_repeats_change_who_follows_the_heaviest():
    # k = 0, fixed k = 3, adaptive: under a rotation adaptive ran right after fixed k = 3 in every repeat but the one
    # it started.
    after_k3 = [row[row.index("k3") + 1] for row in (balanced_order(["k0", "k3", "adaptive"], r) for r in range(3))
                if row[-1] != "k3"]
    assert set(after_k3) == {"k0", "adaptive"}


def test_the_order_repeats_after_a_cycle():
    methods = list("abcde")
    assert [balanced_order(methods, r) for r in range(cycle(5))] == \
        [balanced_order(methods, r + cycle(5)) for r in range(cycle(5))]
