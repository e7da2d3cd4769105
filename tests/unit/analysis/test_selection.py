"""The sweep's and the tuner's decisions on known curves and known measurements."""

from __future__ import annotations

import math

import pytest

from tsbatch.analysis.selection import (
    TunePoint,
    allowed_delays,
    batch_one_baseline,
    knee_batch_size,
    largest_within_budget,
    longer_delay_pointless,
    power_of_two_batch_sizes,
    reachable_batch_sizes,
    select_configuration,
    sla_violations,
    stop_growing_batch,
)
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.profiles import Sla

SLA = Sla(
    model="m", profile="test", p50_ms=150, p95_ms=400, p99_ms=600, max_error_rate=0.01, min_throughput_rps=10
)
SIZES = [1, 2, 4, 8, 16, 32, 64]


def point(batch: int, rps: float, p99: float, delay: int = 5, workers: int = 1, **extra: object) -> TunePoint:
    values = {"p50_ms": p99 / 3, "p95_ms": p99 / 1.5, "requests": 500, **extra}
    settings = BatchSettings.for_point(batch, delay, workers)
    return TunePoint("m", settings, throughput_rps=rps, p99_ms=p99, **values)  # type: ignore[arg-type]


# ---------------------------------------------------------------- knee
def test_knee_of_a_saturating_curve_is_the_first_batch_at_ninety_percent_of_peak() -> None:
    throughputs = [100, 190, 350, 600, 800, 850, 860]  # 90% of 860 = 774
    assert knee_batch_size(SIZES, throughputs) == 16


def test_knee_of_a_curve_still_rising_is_its_last_batch() -> None:
    assert knee_batch_size(SIZES, [100 * b for b in SIZES]) == 64


def test_knee_of_a_flat_curve_is_batch_one() -> None:
    assert knee_batch_size(SIZES, [500, 505, 498, 510, 502, 499, 501]) == 1


def test_knee_when_throughput_falls_after_a_peak() -> None:
    # Peak 300 at batch 4, then contention: 90% of the peak is first reached at 4.
    assert knee_batch_size([1, 2, 4, 8, 16], [100, 200, 300, 280, 150]) == 4


def test_knee_ignores_input_order_and_missing_points() -> None:
    assert knee_batch_size([8, 1, 4, 2], [600, 100, 350, 190]) == 8
    assert knee_batch_size([1, 2, 4], [100, math.nan, 95]) == 1
    assert knee_batch_size([], []) is None
    with pytest.raises(ValueError):
        knee_batch_size([1, 2], [1.0])


def test_knee_fraction_is_a_parameter() -> None:
    throughputs = [100, 190, 350, 600, 800, 850, 860]
    assert knee_batch_size(SIZES, throughputs, fraction=0.5) == 8
    assert knee_batch_size(SIZES, throughputs, fraction=1.0) == 64


# ---------------------------------------------------------------- latency budget
def test_largest_batch_within_the_budget() -> None:
    latencies = [5, 6, 9, 20, 40, 80, 160]
    assert largest_within_budget(SIZES, latencies, 20) == 8
    assert largest_within_budget(SIZES, latencies, 1000) == 64
    assert largest_within_budget(SIZES, latencies, 4) is None


def test_budget_stops_at_the_first_breach_even_if_a_larger_batch_reads_faster() -> None:
    assert largest_within_budget([1, 2, 4], [5, 25, 10], 20) == 1


def test_power_of_two_batch_sizes() -> None:
    assert power_of_two_batch_sizes(64) == SIZES
    assert power_of_two_batch_sizes(8) == [1, 2, 4, 8]
    assert power_of_two_batch_sizes(10) == [1, 2, 4, 8, 10]
    assert power_of_two_batch_sizes(1) == [1]
    with pytest.raises(ValueError):
        power_of_two_batch_sizes(0)


# ---------------------------------------------------------------- SLA checks
def test_a_point_within_every_target_has_no_violation() -> None:
    assert sla_violations(point(8, 300, 120), SLA) == []


def test_each_breach_is_named_with_its_numbers() -> None:
    slow = point(8, 5, 900, p50_ms=200.0, p95_ms=450.0, error_rate=0.05)
    assert sla_violations(slow, SLA) == [
        "p50 200 ms > 150 ms",
        "p95 450 ms > 400 ms",
        "p99 900 ms > 600 ms",
        "error rate 5.00% > 1.00%",
        "throughput 5.0 rps < 10.0 rps",
    ]


def test_unmeasured_points_never_meet_the_sla() -> None:
    assert sla_violations(point(8, 0, math.nan, failure="ServerError: boom"), SLA) == [
        "not measured: ServerError: boom"
    ]
    assert sla_violations(point(8, 0, math.nan, requests=0), SLA) == [
        "no request completed in the measured window"
    ]
    # NaN latencies (nothing answered) must not slip through a <= comparison
    assert "p99 nan ms > 600 ms" in sla_violations(point(8, 50, math.nan), SLA)


# ---------------------------------------------------------------- selection
def test_highest_throughput_meeting_the_sla_wins_and_every_loser_says_why() -> None:
    points = [
        point(1, 90, 150),
        point(4, 200, 110),
        point(8, 350, 40),
        point(16, 420, 700),  # fastest, but over the p99 ceiling
        point(8, 360, 90, workers=2, error_rate=0.03),  # too many errors
    ]
    selection = select_configuration(points, SLA)
    assert selection.winner is points[2]
    reasons = {v.point.short_label: v.reason for v in selection.verdicts}
    assert reasons["b8 d5 w1"].startswith("highest throughput meeting the SLA")
    assert reasons["b1 d5 w1"] == "meets the SLA but slower: 90.0 rps vs the winner's 350.0 rps"
    assert (
        reasons["b16 d5 w1"]
        == "misses the SLA: p50 233 ms > 150 ms; p95 467 ms > 400 ms; p99 700 ms > 600 ms"
    )
    assert reasons["b8 d5 w2"] == "misses the SLA: error rate 3.00% > 1.00%"
    assert [v.won for v in selection.verdicts].count(True) == 1
    assert "wins with 350.0 rps at p99 40 ms" in selection.message


def test_a_throughput_tie_goes_to_the_lower_p99() -> None:
    noisy_faster = point(16, 404, 300)
    calmer = point(8, 400, 80)  # within 2% of 404
    selection = select_configuration([noisy_faster, calmer], SLA)
    assert selection.winner is calmer
    loser = next(v for v in selection.verdicts if v.point is noisy_faster)
    assert "ties on throughput" in loser.reason and "p99 300 ms" in loser.reason


def test_no_configuration_meeting_the_sla_is_said_plainly() -> None:
    points = [point(1, 5, 900), point(8, 40, 1200), point(8, 0, math.nan, failure="ServerError: no start")]
    selection = select_configuration(points, SLA)
    assert selection.winner is None
    assert selection.message.startswith("NO configuration of m meets the test SLA")
    assert "all 3 tried failed" in selection.message
    assert all(not v.meets_sla and v.reason.startswith("misses the SLA") for v in selection.verdicts)


def test_empty_search_has_no_winner() -> None:
    selection = select_configuration([], SLA)
    assert selection.winner is None and selection.verdicts == []


def test_batch_one_baseline_is_the_best_unbatched_point_meeting_the_same_sla() -> None:
    points = [
        point(1, 90, 150),
        point(1, 120, 700, workers=2),
        point(1, 100, 200, workers=2),
        point(8, 350, 40),
    ]
    assert batch_one_baseline(points, SLA) is points[2]
    assert batch_one_baseline([point(1, 90, 900), point(8, 350, 40)], SLA) is None


# ---------------------------------------------------------------- pruning
def test_delays_over_half_the_p99_ceiling_are_never_tried() -> None:
    assert allowed_delays([5, 20, 300, 301, 1000], SLA) == ([5, 20, 300], [301, 1000])


def test_batch_sizes_above_the_concurrency_are_unreachable_in_a_closed_loop() -> None:
    assert reachable_batch_sizes([1, 2, 4, 8, 16, 32], 8) == ([1, 2, 4, 8], [16, 32])
    assert reachable_batch_sizes([4, 1, 4], None) == ([1, 4], [])


def test_a_lane_keeps_growing_while_throughput_rises() -> None:
    assert stop_growing_batch([point(1, 90, 150), point(2, 150, 120), point(4, 200, 110)], SLA) is None
    assert stop_growing_batch([], SLA) is None


def test_a_lane_stops_once_throughput_stopped_rising_for_two_steps() -> None:
    lane = [point(1, 90, 150), point(4, 200, 110), point(8, 205, 100)]
    assert stop_growing_batch(lane, SLA) is None  # one flat step may be noise
    why = stop_growing_batch([*lane, point(16, 180, 100)], SLA)
    assert why == (
        "throughput stopped rising: b8 d5 w1 205.0 rps, b16 d5 w1 180.0 rps vs 200.0 rps at b4 d5 w1 (< +5%)"
    )
    assert stop_growing_batch(lane, SLA, patience=1) is not None


def test_a_lane_goes_on_when_growth_resumes_after_a_noisy_step() -> None:
    lane = [point(1, 90, 150), point(2, 150, 120), point(4, 140, 110), point(8, 260, 100)]
    assert stop_growing_batch(lane, SLA) is None


def test_a_lane_stops_on_errors_or_a_failed_point() -> None:
    why = stop_growing_batch([point(1, 90, 150), point(4, 300, 110, error_rate=0.2)], SLA)
    assert why is not None and "overloaded" in why
    assert stop_growing_batch([point(4, 0, math.nan, failure="x")], SLA) == "b4 d5 w1 could not be measured"


def test_a_longer_delay_is_pointless_once_batches_come_full() -> None:
    full = point(8, 350, 40, mean_batch_size=7.9)
    why = longer_delay_pointless(full)
    assert why is not None and "already formed full batches (mean 7.90 of 8)" in why
    assert (
        longer_delay_pointless(point(8, 200, 40, mean_batch_size=3.2)) is None
    )  # underfilled: waiting may help
    assert longer_delay_pointless(point(8, 200, 40)) is None  # batch size unknown (no metrics)
    assert longer_delay_pointless(point(1, 90, 150, mean_batch_size=1.0)) is None
