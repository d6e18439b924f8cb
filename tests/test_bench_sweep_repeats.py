"""The serving sweep's per-repeat table (scripts/bench_mtp_sweep.py): every repeat of a cell keeps its own drafting
counts, not only the median one, so that a repeat whose steps ran k = 0 more often shows as such."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_mtp_sweep as sweep  # noqa: E402


def repeat(tpot, steps_by_k, retired, without_mtp, stolen=None):
    return {"method": "MTP adaptive k_max=3", "k": 3, "policy": "adaptive", "concurrency": 64, "mean_tpot_ms": tpot,
            "step_ms": 1.8, "target_ms": 1.0, "draft_seconds": 1.5, "engine_steps": 2000, "draft_host_ms": 0.05,
            "plan_ms": 0.02, "steps_by_k": steps_by_k, "retired_sequences": retired,
            "fill_skipped_steps": without_mtp, "threads": {"server": [], "client": [], "stolen": stolen}}


# Three repeats of one cell; the slowest ran k = 0 on 11% of its steps, with one request retired.
REPEATS = [repeat(0.62, [17, 24, 117, 2311], 0, 0, 0.0), repeat(0.69, [275, 25, 0, 2200], 1, 40, 0.0123),
           repeat(0.67, [25, 25, 125, 2325], 0, 0)]


def table_rows(row):
    lines = sweep.repeats_table([row]).splitlines()
    header = [f.strip() for f in lines[0].strip("|").split("|")]
    return [dict(zip(header, (f.strip() for f in line.strip("|").split("|")))) for line in lines[2:]]


def test_the_median_row_keeps_every_repeats_drafting_counts():
    row = sweep.median_row(REPEATS)
    assert row["mean_tpot_ms"] == 0.67
    assert [d["steps_by_k"] for d in row["repeats_drafting"]] == [r["steps_by_k"] for r in REPEATS]
    assert [d["retired_sequences"] for d in row["repeats_drafting"]] == [0, 1, 0]


def test_the_repeats_table_shows_each_repeats_chosen_k_and_retirements():
    rows = table_rows(sweep.median_row(REPEATS))
    assert [r["repeat"] for r in rows] == ["0", "1", "2"]
    assert [r["chosen k (%)"] for r in rows] == ["1 / 1 / 5 / 94", "11 / 1 / 0 / 88", "1 / 1 / 5 / 93"]
    assert [r["retired / steps without MTP"] for r in rows] == ["0 / 0", "1 / 40", "0 / 0"]


def test_a_baseline_repeat_has_no_drafting_to_show():
    baseline = {**repeat(1.1, [], None, None), "method": "baseline", "k": 0, "policy": "fixed"}
    rows = table_rows(sweep.median_row([baseline]))
    assert rows[0]["chosen k (%)"] == "-"
    assert rows[0]["retired / steps without MTP"] == "-"


def test_the_repeats_table_shows_the_cpu_share_stolen_during_each_repeat():
    rows = table_rows(sweep.median_row(REPEATS))
    assert [r["stolen (%)"] for r in rows] == ["0.00", "1.23", "-"]


def test_a_cell_runs_again_only_while_more_than_the_threshold_was_stolen_and_reruns_are_left():
    assert not sweep.rerun_due([0.05], None, 2)  # --rerun-stolen not given
    assert sweep.rerun_due([0.0123], 1.0, 2)
    assert not sweep.rerun_due([0.0099], 1.0, 2)
    assert sweep.rerun_due([0.05, 0.03], 1.0, 2)
    assert not sweep.rerun_due([0.05, 0.03, 0.02], 1.0, 2)  # two reruns made
    assert not sweep.rerun_due([None], 1.0, 2)  # no /proc/stat to read


def test_the_repeats_table_shows_the_shares_of_the_runs_a_rerun_replaced():
    rerun = repeat(0.64, [17, 24, 117, 2311], 0, 0, 0.004)
    rerun["threads"]["stolen_runs"] = [0.0312, 0.0150, 0.004]
    rows = table_rows(sweep.median_row([rerun]))
    assert rows[0]["stolen (%)"] == "0.40 (reran after 3.12, 1.50)"
