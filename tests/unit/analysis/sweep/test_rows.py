"""sweep.csv: rows come back typed, missing values as None, and curves group them in order."""

from __future__ import annotations

from pathlib import Path

from tsbatch.analysis.sweep.rows import SweepRow, curves, read_csv, write_csv


def test_rows_survive_the_csv_with_missing_values(tmp_path: Path) -> None:
    rows = [
        SweepRow(
            "m", "16x16", "fp32", "cpu", 1, "ok", iterations=3, latency_mean_ms=1.5, throughput_sps=666.7
        ),
        SweepRow("m", "16x16", "fp32", "cpu", 2, "oom", note="OutOfMemoryError: no room"),
    ]
    write_csv(rows, tmp_path / "out" / "sweep.csv")
    back = read_csv(tmp_path / "out" / "sweep.csv")
    assert back == rows
    assert back[1].latency_mean_ms is None and back[1].iterations == 0


def test_curves_group_by_model_scenario_and_precision_in_first_seen_order() -> None:
    rows = [
        SweepRow("b", "s", "fp32", "cpu", 1, "ok"),
        SweepRow("a", "s", "fp32", "cpu", 1, "ok"),
        SweepRow("b", "s", "fp32", "cpu", 2, "ok"),
        SweepRow("b", "s", "bf16", "cpu", 1, "ok"),
    ]
    groups = list(curves(rows))
    assert [key for key, _ in groups] == [("b", "s", "fp32"), ("a", "s", "fp32"), ("b", "s", "bf16")]
    assert [r.batch_size for r in groups[0][1]] == [1, 2]
