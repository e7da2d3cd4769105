"""The overload benchmark's arithmetic: what each answer counts as, and the table (the runs
need a server: `tsbatch bench overload`)."""

from __future__ import annotations

import json

import pytest

from batchkit.errors import DeadlineExceeded
from batchkit.protocols import Protocol, error_body
from tsbatch.bench.overload import deadline_headers, render_rows, row_of
from tsbatch.client.load import NO_ANSWER, Record
from tsbatch.sla.gate import Window

WINDOW = Window(100.0, 110.0)
SHED_BODY = json.dumps(error_body(DeadlineExceeded.error("late", 1), Protocol.SINGLE)).encode()
QUEUE_FULL_BODY = b'{"code": 503, "type": "ServiceUnavailableException", "message": "Model has no worker"}'


def answer(start: float, status: int = 200, latency_ms: float | None = 100.0, body: bytes = b"") -> Record:
    return Record("resnet18", start, latency_ms, status == 200, status, None if status == 200 else "x", body)


def test_a_row_counts_goodput_within_the_target_and_each_kind_of_503() -> None:
    records = [
        *(answer(101.0 + i / 10) for i in range(30)),  # in time
        *(answer(102.0 + i / 10, latency_ms=450.0) for i in range(10)),  # served late
        *(answer(103.0, 503, 5.0, SHED_BODY) for _ in range(7)),
        *(answer(104.0, 503, 2.0, QUEUE_FULL_BODY) for _ in range(5)),
        answer(105.0, NO_ANSWER, None),  # a timeout
        answer(99.0),  # warm-up: not counted
        answer(110.0),  # after the window
    ]
    row = row_of(records, WINDOW, 2.0, True, p99_ms=300.0)
    assert row.offered_rps == pytest.approx(53 / 10)
    assert row.goodput_rps == pytest.approx(3.0)
    assert (row.served, row.shed, row.queue_full, row.other) == (40, 7, 5, 1)
    assert row.served_p99_ms == 450.0
    assert (row.multiple, row.shedding) == (2.0, True)


def test_a_row_with_nothing_served_has_no_p99() -> None:
    row = row_of([answer(101.0, 503, 1.0, QUEUE_FULL_BODY)], WINDOW, 1.0, False, 300.0)
    assert row.served_p99_ms is None and row.goodput_rps == 0 and row.queue_full == 1


def test_the_table_ends_with_the_heaviest_shedding_row_against_capacity() -> None:
    records = [answer(101.0 + i / 20) for i in range(160)]
    rows = [
        row_of(records, WINDOW, 2.0, False, 300.0),
        row_of(records, WINDOW, 2.0, True, 300.0),
        row_of(records[:40], WINDOW, 1.0, True, 300.0),
    ]
    lines = render_rows(rows, capacity_rps=20.0, p99_ms=300.0)
    assert len(lines) == 5 and "goodput" in lines[0]
    assert lines[1].split()[:4] == ["2x", "off", "16.0", "16.0"]
    assert lines[-1] == "at 2x with shedding: goodput 0.80x capacity, served p99 100 ms (target 300 ms)"


def test_each_request_s_deadline_is_its_due_time_plus_the_target() -> None:
    headers = deadline_headers("resnet18", 250.0)
    assert headers(1_700_000_000.0) == {"X-Request-Deadline-Ms": "1700000000250"}
    assert headers(1_700_000_001.5) == {"X-Request-Deadline-Ms": "1700000001750"}
