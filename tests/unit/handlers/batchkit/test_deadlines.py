"""A request's deadline against the worker's batch time (batchkit/deadlines.py)."""

from __future__ import annotations

import pytest

from batchkit.deadlines import (
    ARRIVAL_HEADER,
    DEADLINE_HEADER,
    RELEARN_AFTER_MS,
    DeadlinePolicy,
    arrival_of,
    deadline_of,
    shed_error,
)
from batchkit.errors import RequestError

NOW = 1_800_000_000_000.0  # Unix ms


def test_the_header_is_read_in_any_case_and_absent_means_no_deadline() -> None:
    assert deadline_of({}) is None
    assert deadline_of({"x-request-deadline-ms": "1800000000500"}) == 1_800_000_000_500.0
    assert deadline_of({DEADLINE_HEADER.upper(): "1800000000500.5"}) == 1_800_000_000_500.5


@pytest.mark.parametrize("text", ["soon", "", "-5", "0", "inf", "nan", "1e30"])
def test_a_deadline_that_is_no_time_is_a_400_naming_the_header(text: str) -> None:
    error = deadline_of({DEADLINE_HEADER: text})
    assert error is not None and not isinstance(error, float)
    assert (error.status, error.code) == (400, "invalid_deadline")
    assert DEADLINE_HEADER in error.message and "milliseconds" in error.message


def test_a_passed_deadline_is_a_503_saying_how_late() -> None:
    error = shed_error(NOW - 250, NOW, expected_batch_ms=40)
    assert error is not None and (error.status, error.code) == (503, "deadline_exceeded")
    assert "passed 250 ms before its batch ran" in error.message and error.retry_after_s == 1


def test_a_deadline_the_batch_cannot_meet_is_shed_and_one_it_can_is_kept() -> None:
    late = shed_error(NOW + 30, NOW, expected_batch_ms=2500)
    assert late is not None and "30 ms away" in late.message and "2500 ms or more" in late.message
    assert late.retry_after_s == 3  # a batch's time, rounded up to whole seconds
    assert shed_error(NOW + 30, NOW, expected_batch_ms=20) is None


def deadline_in(ms: float) -> dict[str, str]:
    return {DEADLINE_HEADER: str(NOW + ms)}


def test_the_policy_learns_batch_times_and_a_first_batch_sheds_only_the_late() -> None:
    policy = DeadlinePolicy()
    first = policy.verdicts([deadline_in(50), {}, deadline_in(-1)], NOW)  # nothing measured yet
    assert [verdict is None for verdict in first] == [True, True, False]
    policy.observe(100.0, inputs=4)
    assert policy.expected_ms(4) == 100.0
    (verdict,) = policy.verdicts([deadline_in(50)], NOW)
    assert verdict is not None and verdict.code == "deadline_exceeded"
    policy.observe(1000.0, inputs=0)  # nothing computed: nothing learnt
    assert policy.batches_seen == 1


def test_the_latest_due_are_kept_while_the_growing_batch_still_meets_each_deadline() -> None:
    """At 100 ms an input (no fixed cost), one request without a deadline is computed anyway:
    a second input ends at 200 ms, a third at 300 ms. The 1000 ms and 300 ms deadlines fit;
    the 250 ms one would need a 400 ms batch, and the 120 ms one is shed though alone it would
    have fit."""
    policy = DeadlinePolicy()
    for _ in range(4):
        policy.observe(100.0, inputs=1)
        policy.observe(400.0, inputs=4)
    headers = [deadline_in(120), {}, deadline_in(1000), deadline_in(250), deadline_in(300)]
    verdicts = policy.verdicts(headers, NOW)
    assert [verdict is None for verdict in verdicts] == [False, True, True, False, True]
    shed = verdicts[3]
    assert shed is not None and "250 ms away" in shed.message and "400 ms or more" in shed.message


def test_after_one_input_batches_a_burst_is_not_predicted_at_n_times_their_time() -> None:
    """Light traffic (batches of one at 10 ms, 8 of it fixed cost), then a burst of eight due
    in 40 ms: per input that was 80 ms and shed most of the burst; the line through both sizes
    (and, before the first burst, the one size seen) keeps all eight."""
    policy = DeadlinePolicy()
    for _ in range(20):
        policy.observe(10.0, inputs=1)
    burst = [deadline_in(40)] * 8
    assert all(verdict is None for verdict in policy.verdicts(burst, NOW)), (
        "one size seen: errs toward computing"
    )
    policy.observe(24.0, inputs=8)
    assert policy.expected_ms(8) < 30
    assert all(verdict is None for verdict in policy.verdicts(burst, NOW))


def test_a_deadline_the_batch_meets_in_its_usual_jitter_is_computed() -> None:
    """Batches of eight alternate 20 and 30 ms (25 expected, jitter 5): a burst due in 27 ms
    is on time in half of its batches, so it is computed; of one due in 15 ms only the part
    that a smaller batch can still serve in time is kept."""
    policy = DeadlinePolicy()
    for _ in range(10):
        policy.observe(20.0, inputs=8)
        policy.observe(30.0, inputs=8)
    policy.observe(5.0, inputs=1)
    assert policy.expected_ms(8) > 27 - 5 and policy.verdict_ms(8, busy=False) < policy.expected_ms(8)
    assert all(verdict is None for verdict in policy.verdicts([deadline_in(27)] * 8, NOW))
    kept = sum(verdict is None for verdict in policy.verdicts([deadline_in(15)] * 8, NOW))
    light = [policy.verdict_ms(inputs, busy=False) for inputs in (kept, kept + 1)]
    assert 0 < kept < 8 and light[0] <= 15 < light[1]


def test_a_saturated_worker_keeps_only_what_ends_in_time_even_three_jitters_slow() -> None:
    """The same batches, but back to back for the last second: requests queue behind each
    batch, so one computed late would delay them all. A burst due in 27 ms (on time in half
    of its batches) is shed; of one due in 32 ms, only what ends in time three usual jitters
    slower than expected is kept. Half a second later, with half of that second spent
    computing (a burst after a trickle), the light-traffic rule holds again."""
    policy = DeadlinePolicy(batch_delay_ms=10)
    ended = NOW - 1000.0
    for _ in range(19):
        for batch_ms in (20.0, 30.0):
            ended += batch_ms + 1
            policy.observe(batch_ms, inputs=8, ended_ms=ended)
    policy.observe(5.0, inputs=1, ended_ms=NOW - 1)
    policy.last_computed_ms = NOW
    assert policy.busy(NOW) and not policy.busy(NOW + 500)
    assert policy.verdict_ms(8, busy=True) > policy.expected_ms(8) > policy.verdict_ms(8, busy=False)
    busy_kept = sum(verdict is None for verdict in policy.verdicts([deadline_in(27)] * 8, NOW))
    assert busy_kept < 8
    later = [{DEADLINE_HEADER: str(NOW + 500 + 27)}] * 8
    assert all(verdict is None for verdict in policy.verdicts(later, NOW + 500)), "a quiet half second"
    kept = sum(verdict is None for verdict in policy.verdicts([deadline_in(32)] * 8, NOW))
    saturated = [policy.verdict_ms(inputs, busy=True) for inputs in (kept, kept + 1)]
    assert 0 < kept < 8 and saturated[0] <= 32 < saturated[1]


def test_every_input_of_a_multi_input_request_counts() -> None:
    """32 images in one request make a batch of 32 inputs, not one."""
    policy = DeadlinePolicy()
    for _ in range(4):
        policy.observe(5.0, inputs=1)
        policy.observe(100.0, inputs=32)
    policy.last_computed_ms = NOW  # it has just computed (no re-measuring due)
    (verdict,) = policy.verdicts([deadline_in(51)], NOW, inputs=[32])
    assert verdict is not None and "100 ms or more" in verdict.message
    assert policy.verdicts([deadline_in(51)], NOW, inputs=[1]) == [None]


@pytest.mark.parametrize(
    ("text", "unit"),
    [("1794662580", "seconds"), ("1794662580.424", "seconds"), ("300", "seconds"),
     ("1794662580424000", "microseconds"), ("1794662580424000000", "nanoseconds")],
)  # fmt: skip
def test_a_deadline_in_another_unit_is_a_400_saying_which_unit_is_expected(text: str, unit: str) -> None:
    error = deadline_of({DEADLINE_HEADER: text})
    assert isinstance(error, RequestError) and (error.status, error.code) == (400, "invalid_deadline")
    assert "Unix time in milliseconds" in error.message and unit in error.message, error.message


@pytest.mark.parametrize(
    "headers",
    [
        {DEADLINE_HEADER: "1800000000500, 1800000000600"},
        {DEADLINE_HEADER: "1800000000500", DEADLINE_HEADER.lower(): "1800000000600"},
    ],
)
def test_a_deadline_sent_twice_is_a_400_in_either_form(headers: dict[str, str]) -> None:
    error = deadline_of(headers)
    assert isinstance(error, RequestError) and error.status == 400 and "sent 2 times" in error.message


def test_a_deadline_passed_before_arrival_gets_no_retry_after() -> None:
    """Passed before the proxy's stamp, or before the idle worker's last batch ended: a retry
    of the same request would be shed again. Passed while it was queued: Retry-After."""
    policy = DeadlinePolicy(batch_delay_ms=10, idle_since_ms=NOW - 5000)
    stamped = {**deadline_in(-2000), ARRIVAL_HEADER: f"{NOW - 1000:.0f}"}
    before_idle = deadline_in(-6000)
    while_busy = deadline_in(-3000)
    verdicts = policy.verdicts([stamped, before_idle, while_busy], NOW)
    assert [verdict.retry_after_s if verdict else "kept" for verdict in verdicts] == [None, None, 1]
    assert verdicts[0] is not None and "before it reached the server" in verdicts[0].message
    busy = DeadlinePolicy(batch_delay_ms=10, idle_since_ms=NOW - 50)  # just ended a batch: maybe queued
    (verdict,) = busy.verdicts([before_idle], NOW)
    assert verdict is not None and verdict.retry_after_s == 1


def test_a_default_budget_counts_from_the_proxy_s_arrival_stamp_in_any_unit() -> None:
    arrival_s = NOW / 1000 - 0.2  # stamped 200 ms ago
    for stamp in (f"t={arrival_s:.3f}", f"{arrival_s * 1000:.0f}", f"t={arrival_s * 1e6:.0f}"):
        deadline = deadline_of({"x-request-start": stamp}, budget_ms=500)
        assert deadline == pytest.approx(NOW + 300, abs=1), stamp
    assert arrival_of({ARRIVAL_HEADER: f"{arrival_s * 1e9:.0f}"}) == pytest.approx(NOW - 200, abs=1)
    assert deadline_of({ARRIVAL_HEADER: f"{arrival_s * 1000:.0f}"}) is None, "no budget: no deadline"
    assert deadline_of({}, budget_ms=500) is None, "no stamp: the budget cannot apply"
    explicit = {**deadline_in(50), ARRIVAL_HEADER: f"{arrival_s * 1000:.0f}"}
    assert deadline_of(explicit, budget_ms=500) == NOW + 50, "the client's own deadline wins"


def test_a_stamp_that_is_no_time_is_a_400_naming_the_header() -> None:
    error = deadline_of({ARRIVAL_HEADER: "t=yesterday"}, budget_ms=500)
    assert isinstance(error, RequestError) and (error.status, error.code) == (400, "invalid_deadline")
    assert ARRIVAL_HEADER in error.message and "t=" in error.message


def test_a_budget_sheds_a_request_that_waited_it_out() -> None:
    policy = DeadlinePolicy(budget_ms=300)
    stamped = {ARRIVAL_HEADER: f"t={(NOW - 400) / 1000:.3f}"}
    (verdict,) = policy.verdicts([stamped], NOW)
    assert verdict is not None and "passed 100 ms" in verdict.message


def test_after_a_second_of_shedding_everything_the_latest_due_in_time_is_computed_to_measure_again() -> None:
    """One slow spell inflates the prediction; only computed batches correct it, so a worker
    that would shed every request for good computes one now and then."""
    policy = DeadlinePolicy()
    policy.observe(5000.0, inputs=1)
    assert policy.verdicts([deadline_in(300), deadline_in(200)], NOW)[0] is None, "computed: measure again"
    assert all(policy.verdicts([deadline_in(300)], NOW + 100)), "just computed one: shed"
    later = NOW + RELEARN_AFTER_MS
    verdicts = policy.verdicts(
        [{DEADLINE_HEADER: str(later - 1)}, {DEADLINE_HEADER: str(later + 300)}], later
    )
    assert [verdict is None for verdict in verdicts] == [False, True], "only one still in time"
    assert all(policy.verdicts([{DEADLINE_HEADER: str(later + 300)}], later + 500))
