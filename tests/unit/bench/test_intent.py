"""The intent benchmark's own parts: its HTTP client parsing and its summary (no server)."""

from __future__ import annotations

import asyncio

import pytest

from tsbatch.bench.intent import RunResult, parse_setting, percentile, read_response, summarize


def parse(raw: bytes) -> tuple[int, bytes, bool]:
    async def run() -> tuple[int, bytes, bool]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_response(reader)

    return asyncio.run(run())


def test_read_response_handles_length_and_chunked_bodies() -> None:
    assert parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello") == (200, b"hello", True)
    chunked = (
        b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    assert parse(chunked) == (400, b"abcde", True)
    closing = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
    assert parse(closing) == (503, b"", False)


def test_percentile_and_settings() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert parse_setting("2x1") == (2, 1)
    assert parse_setting("1X2") == (1, 2)
    assert parse_setting("3") == (3, 1)


def result(handler: str, workers: int, rps: float, errors: int = 0) -> RunResult:
    return RunResult(handler, workers, 1, 16, 10.0, int(rps * 10), errors, rps, 10.0, 20.0, 30.0, 40.0)


def test_summary_compares_each_handler_at_its_best_error_free_setting() -> None:
    summary = summarize(
        [
            result("ours", 1, 200.0),
            result("usual", 1, 40.0),
            result("ours", 2, 320.0),
            result("usual", 2, 50.0, errors=3),
        ]
    )
    assert summary["best"]["ours"]["workers"] == 2
    assert summary["best"]["usual"]["workers"] == 1  # the faster run had errors
    assert summary["ratios"]["best_vs_best"] == pytest.approx(8.0)
    assert summary["ratios"]["1x1"] == pytest.approx(5.0)
