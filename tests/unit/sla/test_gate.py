"""The SLA gate's arithmetic on known inputs: the measured window, verdicts, load levels."""

from __future__ import annotations

import json

import pytest

from tsbatch.sla import gate
from tsbatch.sla.gate import Sample, Window
from tsbatch.sla.profiles import Sla

SLA = Sla("resnet18", "test", p50_ms=20, p95_ms=40, p99_ms=60, max_error_rate=0.02, min_throughput_rps=5)


# ---------------------------------------------------------------- window and measurement
def samples_with_slow_ramp_up() -> list[Sample]:
    """Ramp-up (t < 100) is slow and failing; the measured part (100 <= t < 110) is fast."""
    ramp = [Sample("resnet18", 95 + i * 0.1, 900.0, ok=i % 2 == 0) for i in range(40)]
    steady = [Sample("resnet18", 100 + i * 0.1, 10.0 + i % 10, ok=True) for i in range(100)]
    return ramp + steady


def test_measure_counts_only_requests_sent_inside_the_window() -> None:
    measured = gate.measure(samples_with_slow_ramp_up(), "resnet18", Window(100.0, 110.0))
    assert measured.requests == 100
    assert measured.failures == 0
    assert (measured.p50_ms, measured.p95_ms, measured.p99_ms) == (14.0, 19.0, 19.0)
    assert measured.throughput_rps == pytest.approx(10.0)
    assert measured.error_rate == 0.0


def test_ramp_up_exclusion_decides_the_verdict() -> None:
    samples = samples_with_slow_ramp_up()
    after_ramp = gate.evaluate(gate.measure(samples, "resnet18", Window(100.0, 110.0)), SLA)
    whole_run = gate.evaluate(gate.measure(samples, "resnet18", Window(95.0, 110.0)), SLA)
    assert after_ramp.passed
    assert not whole_run.passed
    assert {c.figure for c in whole_run.breaches} == {"p95_ms", "p99_ms", "max_error_rate"}


def test_dropped_requests_count_as_errors_without_latency() -> None:
    samples = [Sample("m", 1.0 + i, 10.0, True) for i in range(9)] + [Sample("m", 5.0, None, False)]
    measured = gate.measure(samples, "m", Window(0.0, 10.0))
    assert measured.requests == 10 and measured.failures == 1
    assert measured.p99_ms == 10.0  # no fake 0 ms pulled into the latency figures


# ---------------------------------------------------------------- verdicts
def test_each_figure_is_checked_in_its_direction() -> None:
    measured = gate.Measured(
        "resnet18", requests=100, failures=3, window_s=10.0, p50_ms=20.0, p95_ms=41.0, p99_ms=59.9
    )
    verdict = gate.evaluate(measured, SLA)
    by_figure = {check.figure: check.passed for check in verdict.checks}
    assert by_figure == {
        "p50_ms": True,  # equal to the target is within it
        "p95_ms": False,
        "p99_ms": True,
        "max_error_rate": False,  # 3% > 2%
        "min_throughput_rps": True,  # 97 ok / 10 s = 9.7 >= 5
    }
    assert gate.gate_exit_code([verdict]) == 1


def test_no_requests_fails_every_figure() -> None:
    verdict = gate.evaluate(gate.measure([], "resnet18", Window(None, 10.0)), SLA)
    assert not verdict.passed
    assert all(check.measured is None and not check.passed for check in verdict.checks)
    assert gate.breach_summary([verdict]) == ["resnet18: no requests in the measured window"]


def test_exit_code_needs_at_least_one_model_and_all_passing() -> None:
    good = gate.evaluate(gate.Measured("a", 100, 0, 10.0, 1.0, 2.0, 3.0), SLA)
    bad = gate.evaluate(gate.Measured("b", 100, 0, 10.0, 1.0, 2.0, 300.0), SLA)
    assert gate.gate_exit_code([good]) == 0
    assert gate.gate_exit_code([good, bad]) == 1
    assert gate.gate_exit_code([]) == 1


def test_table_names_the_breached_figure_and_model() -> None:
    samples = [Sample("resnet18", 100 + i * 0.1, 12.5, True) for i in range(100)]
    impossible = Sla(
        "resnet18", "strict", p50_ms=100, p95_ms=100, p99_ms=0.5, max_error_rate=0.01, min_throughput_rps=1
    )
    window = Window(100.0, 110.0)
    verdicts = gate.evaluate_all(samples, {"resnet18": impossible}, ["resnet18"], window)
    text = gate.format_table(verdicts, window)
    assert "profile strict" in text
    assert "resnet18: p99_ms = 12.5 ms, target <= 0.5 ms" in text
    lines = text.splitlines()
    assert lines[-3:] == [
        "SLA gate: FAIL",
        "  breached: resnet18: p99_ms = 12.5 ms, target <= 0.5 ms",
        "  why: resnet18: no server figures for the measured window: the cause cannot be read from TorchServe",
    ]
    report = json.loads(gate.report_json(verdicts, window))
    assert report["passed"] is False
    assert [c["figure"] for c in report["models"][0]["checks"] if not c["passed"]] == ["p99_ms"]


def test_table_rows_for_the_web_ui() -> None:
    verdict = gate.evaluate(gate.Measured("resnet18", 50, 1, 10.0, 5.0, 6.0, 7.0), SLA)
    rows = gate.table_rows([verdict])
    assert len(rows) == 5
    assert rows[3] == {
        "model": "resnet18",
        "figure": "error rate",
        "target": "<= 2.00%",
        "measured": "2.00%",
        "result": "PASS",
    }
    assert rows[4]["target"] == ">= 5.0" and rows[4]["measured"] == "4.9"
