"""The serving sweep's verdict (scripts/bench_mtp_sweep.py): adaptive against k = 0 and the best fixed k, by the median
repeats, paired within rounds, and round by round, so that a miss made by one server instance shows as such."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_mtp_sweep as sweep  # noqa: E402


def cell(method, k, policy, tpots):
    row = {"method": method, "k": k, "policy": policy, "concurrency": 80, "repeats_mean_tpot_ms": tpots}
    row["mean_tpot_ms"] = sorted(tpots)[len(tpots) // 2]
    return row


# The H200's greedy c = 80 cell of 2026-11-29: fixed k = 3 drew two fast server instances, adaptive none.
ROWS = [cell("baseline", 0, "fixed", [0.880, 0.888, 0.809]),
        cell("MTP k=2", 2, "fixed", [0.488, 0.432, 0.455]),
        cell("MTP k=3", 3, "fixed", [0.403, 0.406, 0.495]),
        cell("MTP adaptive k_max=3", 3, "adaptive", [0.493, 0.498, 0.453])]


def verdict_row():
    sweep.add_speedups(ROWS)
    lines = sweep.verdict_table(ROWS).splitlines()
    assert len(lines) == 3
    return [field.strip() for field in lines[2].strip("|").split("|")]


def test_round_ratios_pair_each_round_and_paired_ratio_is_their_median():
    k3, adaptive = ROWS[2], ROWS[3]
    assert sweep.round_ratios(k3, adaptive) == pytest.approx([0.403 / 0.493, 0.406 / 0.498, 0.495 / 0.453])
    assert sweep.paired_ratio(k3, adaptive) == pytest.approx(0.403 / 0.493)


def test_round_ratios_need_every_round_of_both():
    assert sweep.round_ratios(ROWS[2], cell("x", 3, "adaptive", [0.4, 0.5])) is None
    assert sweep.round_ratios(ROWS[2], {"repeats_mean_tpot_ms": [0.4, None, 0.5]}) is None
    assert sweep.round_ratios(None, ROWS[3]) is None


def test_the_verdict_lists_each_round_against_k0_and_the_best_fixed_k():
    c, method, vs_base, paired_base, rounds_base, best, vs_best, paired_best, rounds_best = verdict_row()
    assert (c, method, best) == ("80", "MTP adaptive k_max=3", "MTP k=3")
    assert vs_base == f"{0.880 / 0.493:.3f}" and paired_base == f"{0.880 / 0.493:.3f}"
    assert rounds_base == " / ".join(f"{b / a:.3f}" for b, a in [(0.880, 0.493), (0.888, 0.498), (0.809, 0.453)])
    assert vs_best == f"{0.406 / 0.493:.3f}" and paired_best == f"{0.403 / 0.493:.3f}"
    # Two rounds miss 0.95 and one passes it: the reader sees the miss is not every round's.
    assert rounds_best == "0.817 / 0.815 / 1.093"
