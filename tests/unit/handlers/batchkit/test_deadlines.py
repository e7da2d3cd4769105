"""A request's deadline against the worker's batch time (batchkit/deadlines.py)."""

from __future__ import annotations

import pytest

from batchkit.deadlines import DEADLINE_HEADER, DeadlinePolicy, deadline_of, shed_error

NOW = 1_800_000_000_000.0  # Unix ms


def test_the_header_is_read_in_any_case_and_absent_means_no_deadline() -> None:
    assert deadline_of({}) is None
    assert deadline_of({"x-request-deadline-ms": "1800000000500"}) == 1_800_000_000_500.0
    assert deadline_of({DEADLINE_HEADER.upper(): "1800000000500.5"}) == 1_800_000_000_500.5


@pytest.mark.parametrize("text", ["soon", "", "-5", "0", "inf", "nan"])
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
    assert late is not None and "30 ms away" in late.message and "about 2500 ms" in late.message
    assert late.retry_after_s == 3  # a batch's time, rounded up to whole seconds
    assert shed_error(NOW + 30, NOW, expected_batch_ms=20) is None


def test_the_policy_learns_the_batch_time_and_a_first_batch_sheds_only_the_late() -> None:
    policy = DeadlinePolicy()
    headers = {DEADLINE_HEADER: str(NOW + 50)}
    assert policy.verdict(headers, NOW) is None  # nothing measured yet: only a passed deadline sheds
    assert policy.verdict({}, NOW) is None
    policy.observe(100.0)
    assert policy.expected_batch_ms == 100.0
    verdict = policy.verdict(headers, NOW)
    assert verdict is not None and verdict.code == "deadline_exceeded"
    policy.observe(0.0)  # one fast batch moves the estimate, it does not reset it
    assert 0 < policy.expected_batch_ms < 100
