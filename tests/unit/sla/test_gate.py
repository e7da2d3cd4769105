"""The SLA gate's arithmetic on known inputs: percentiles, the measured window, verdicts."""

from __future__ import annotations

import json

import pytest

from tsbatch.locust.recorder import SampleRecorder
from tsbatch.sla import gate
from tsbatch.sla.gate import LoadLevel, Sample, Window
from tsbatch.sla.profiles import Sla

SLA = Sla("resnet18", "test", p50_ms=20, p95_ms=40, p99_ms=60, max_error_rate=0.02, min_throughput_rps=5)


# ---------------------------------------------------------------- percentile
def test_nearest_rank_on_the_textbook_example() -> None:
    values = [15, 20, 35, 40, 50]
    assert gate.percentile(values, 5) == 15
    assert gate.percentile(values, 30) == 20
    assert gate.percentile(values, 40) == 20
    assert gate.percentile(values, 50) == 35
    assert gate.percentile(values, 100) == 50


def test_percentiles_of_1_to_100_are_the_ranks_themselves() -> None:
    values = list(range(100, 0, -1))  # unsorted on purpose
    assert [gate.percentile(values, q) for q in (50, 95, 99, 100)] == [50, 95, 99, 100]


def test_percentile_is_always_an_observed_value_rounded_up() -> None:
    # 10 values: p95 -> rank ceil(9.5) = 10 -> the slowest, not an interpolation.
    values = [1.0] * 9 + [500.0]
    assert gate.percentile(values, 95) == 500.0
    assert gate.percentile(values, 90) == 1.0
    assert gate.percentile([7.25], 99) == 7.25


def test_percentile_keeps_sub_millisecond_precision() -> None:
    assert gate.percentile([0.4, 0.6, 0.8], 50) == 0.6


@pytest.mark.parametrize("q", [-1, 100.5])
def test_percentile_rejects_out_of_range(q: float) -> None:
    with pytest.raises(ValueError):
        gate.percentile([1.0], q)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        gate.percentile([], 50)


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


def test_recorder_window_starts_at_spawning_complete_plus_warmup() -> None:
    recorder = SampleRecorder(warmup_s=2.0, clock=lambda: 200.0)
    assert recorder.window().start is None  # still ramping up: nothing measured yet
    recorder.ramp_up_done(when=100.0)
    recorder.ramp_up_done(when=150.0)  # a later spawning_complete (shape step) does not move it
    recorder.stopped(when=110.0)
    window = recorder.window()
    assert (window.start, window.end, window.seconds) == (102.0, 110.0, 8.0)
    for sample in samples_with_slow_ramp_up():
        recorder.record(sample.model, sample.start, sample.response_time_ms, sample.ok)
    measured = gate.measure(recorder.samples, "resnet18", recorder.window())
    assert measured.requests == 80  # 100 <= t < 102 is warm-up too


def test_recorder_window_is_empty_when_stopped_during_warmup() -> None:
    recorder = SampleRecorder(warmup_s=30.0)
    recorder.ramp_up_done(when=100.0)
    recorder.stopped(when=105.0)
    assert recorder.window().seconds == 0.0


def test_recorder_reset_and_drain() -> None:
    recorder = SampleRecorder()
    recorder.ramp_up_done(when=1.0)
    recorder.record("resnet18", 2.0, 5.5, True)
    rows = recorder.drain()
    assert rows == [["resnet18", 2.0, 5.5, True]] and recorder.samples == []
    master = SampleRecorder()
    master.extend(rows)
    assert master.samples == [Sample("resnet18", 2.0, 5.5, True)]
    recorder.reset()
    assert recorder.window().start is None


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
    assert text.splitlines()[-2] == "SLA gate: FAIL"
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


# ---------------------------------------------------------------- load levels
def test_level_stats_and_knee() -> None:
    samples = []
    # 2 users: 20 req/s; 4 users: 38 req/s; 6 users: 40 req/s (flat: the knee is at 4 users)
    for level, (users, rate) in enumerate([(2, 20), (4, 38), (6, 40)]):
        start = 10.0 * level
        samples += [Sample("m", start + i / rate, 10.0 * users, True) for i in range(rate * 10)]
    levels = [LoadLevel(2, 0.0, 10.0), LoadLevel(4, 10.0, 20.0), LoadLevel(6, 20.0, 30.0)]
    stats = gate.level_stats(samples, levels)
    assert [round(s.throughput_rps) for s in stats] == [20, 38, 40]
    assert [s.p50_ms for s in stats] == [20.0, 40.0, 60.0]
    assert gate.find_knee(stats) == 1
    assert "<- knee" in gate.format_levels(stats).splitlines()[3]


def test_recorder_levels_skip_each_ramp() -> None:
    recorder = SampleRecorder(clock=lambda: 30.0)
    recorder.add_level(2, 1.0, when=0.0)
    recorder.add_level(4, 1.0, when=10.0)
    recorder.stopped(when=20.0)
    assert recorder.load_levels() == [LoadLevel(2, 2.0, 10.0), LoadLevel(4, 12.0, 20.0)]


# ---------------------------------------------------------------- web UI rows
class StateWithSamples:
    """What tsbatch.locust.webui reads from the plugin's state, without importing Locust."""

    def __init__(self, recorder: SampleRecorder, config_error: str | None = None) -> None:
        self.recorder = recorder
        self.config_error = config_error

    def live_verdicts(self) -> tuple[list[gate.Verdict], Window]:
        window = self.recorder.window()
        return gate.evaluate_all(self.recorder.samples, {"resnet18": SLA}, ["resnet18"], window), window


def test_web_ui_rows_wait_during_ramp_up_then_judge() -> None:
    from tsbatch.locust.webui import live_rows

    now = [105.0]
    recorder = SampleRecorder(clock=lambda: now[0])
    recorder.record("resnet18", 101.0, 900.0, True)
    rows, summary = live_rows(StateWithSamples(recorder))
    assert summary["status"] == "WAIT" and {row["result"] for row in rows} == {"WAIT"}

    recorder.ramp_up_done(when=102.0)
    for i in range(100):
        recorder.record("resnet18", 102.0 + i * 0.08, 10.0, True)
    now[0] = 110.0
    rows, summary = live_rows(StateWithSamples(recorder))
    assert summary["status"] == "PASS" and summary["window_s"] == 8.0
    assert (
        rows[0]["measured"] == "8.0 s"
        and rows[3]["figure"] == "p99 latency (ms)"
        and rows[3]["measured"] == "10.0"
    )

    for i in range(
        5
    ):  # 5 slow failures in 105: 4.8% errors; p99 = rank 104 = 5000 ms, p95 = rank 100 = 10 ms
        recorder.record("resnet18", 109.0 + i * 0.1, 5000.0, False)
    _, summary = live_rows(StateWithSamples(recorder))
    assert summary["status"] == "FAIL"
    assert summary["breaches"] == [
        "resnet18: p99_ms = 5000.0 ms, target <= 60.0 ms",
        "resnet18: max_error_rate = 4.76%, target <= 2.00%",
    ]
