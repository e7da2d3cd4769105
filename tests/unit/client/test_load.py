"""The load client against a local scripted HTTP/1.1 server: parsing, both loops, records."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tsbatch.client.load import (
    NO_ANSWER,
    BackgroundLoad,
    Connection,
    LoadDriver,
    LoadSpec,
    Record,
    read_response,
)
from tsbatch.sla.gate import Sample, measure

JSON_OK = b'{"ok": true}'


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers by body: ``fail`` 503 JSON, ``chunked`` a chunked 200, ``close`` a 200 then
    closes, ``slow`` a 200 after 0.3 s, anything else a 200 with a Content-Length."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            body = await reader.readexactly(length)
            if body == b"slow":
                await asyncio.sleep(0.3)
            if body == b"fail":
                writer.write(b'HTTP/1.1 503 Busy\r\nContent-Length: 13\r\n\r\n{"code": 503}')
            elif body == b"chunked":
                writer.write(
                    b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"ok"\r\n7\r\n: true}\r\n0\r\n\r\n'
                )
            elif body == b"close":
                writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 12\r\n\r\n" + JSON_OK)
                await writer.drain()
                writer.close()
                return
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + JSON_OK)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(answer, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/predictions/m"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)


def parse(raw: bytes) -> tuple[int, bytes, bool]:
    async def run() -> tuple[int, bytes, bool]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_response(reader)

    return asyncio.run(run())


def test_read_response_handles_length_chunked_and_closing_answers() -> None:
    assert parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello") == (200, b"hello", True)
    chunked = (
        b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    assert parse(chunked) == (400, b"abcde", True)
    closing = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
    assert parse(closing) == (503, b"", False)
    until_close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it"
    assert parse(until_close) == (200, b"all of it", False)


def test_closed_loop_records_every_request_as_a_gate_sample(url: str) -> None:
    driver = LoadDriver(url, [b"a", b"chunked", b"close", b"b"], content_types="text/plain")
    result = driver.run(LoadSpec(concurrency=3, warmup_s=0.2, measure_s=0.5))
    assert result.model == "m" and result.problems == {}
    assert all(isinstance(r, Sample) and r.ok and r.status == 200 and r.body == b"" for r in result.records)
    figures = result.figures()
    assert figures == measure(result.records, "m", result.window)
    assert figures.requests > 10 and figures.failures == 0
    assert result.statuses() == {200: figures.requests}
    assert figures.requests < len(result.records)  # the warm-up's requests are kept but not measured
    p50, p99 = result.latency_ms(50), result.latency_ms(99)
    assert p50 is not None and p99 is not None and 0 < p50 <= p99


def test_failed_answers_keep_their_body_and_are_counted_by_problem(url: str) -> None:
    seen: list[int] = []

    def check(status: int, body: bytes) -> str | None:
        seen.append(status)
        return None if body == JSON_OK else f"HTTP {status}: {body.decode()}"

    driver = LoadDriver(url, [b"ok", b"fail"], check=check)
    result = driver.run(LoadSpec(concurrency=1, measure_s=0.3))
    failed = [r for r in result.records if not r.ok]
    assert failed and all(r.status == 503 and r.body == b'{"code": 503}' for r in failed)
    assert result.problems == {'HTTP 503: {"code": 503}': len(failed)}
    assert set(seen) == {200, 503}
    assert result.figures().error_rate == pytest.approx(0.5, abs=0.1)


def test_open_loop_latency_counts_from_when_the_request_was_due(url: str) -> None:
    driver = LoadDriver(url, [b"a"])

    async def late_request() -> None:
        connection = Connection(driver.host, driver.port)
        await driver.send(connection, 0, due=time.perf_counter() - 0.5)
        connection.close()

    asyncio.run(late_request())
    (record,) = driver.records
    assert record.ok and record.response_time_ms is not None and record.response_time_ms >= 500
    assert record.finished - record.start == pytest.approx(record.response_time_ms / 1000)
    assert time.time() - record.start >= 0.5  # sent "at" its due time


def test_open_loop_fails_requests_due_over_the_in_flight_cap(url: str) -> None:
    driver = LoadDriver(url, [b"slow"], max_in_flight=1)
    result = driver.run(LoadSpec(rate_rps=100, measure_s=0.5))
    capped = [r for r in result.records if r.problem == "in-flight cap full"]
    answered = [r for r in result.records if r.ok]
    assert capped and answered
    assert all(r.response_time_ms is None and r.status == NO_ANSWER for r in capped)
    assert LoadSpec(rate_rps=100).describe() == "open loop at 100 req/s (Poisson arrivals)"


def test_metrics_are_scraped_at_both_edges_of_the_window(url: str) -> None:
    scrapes: list[float] = []

    def scrape() -> str:
        scrapes.append(time.time())
        return f"scrape {len(scrapes)}"

    result = LoadDriver(url, [b"a"]).run(LoadSpec(warmup_s=0.2, measure_s=0.3), scrape)
    assert (result.metrics_before, result.metrics_after) == ("scrape 1", "scrape 2")
    # At each edge, never before it; late only by as much as a busy machine delays the event
    # loop (a side-by-side run here saw 0.25 s), and the first still inside the window.
    window = result.window
    assert window.start - 0.05 <= scrapes[0] < window.end
    assert window.end - 0.05 <= scrapes[1] <= window.end + 1.0

    def broken() -> str:
        raise OSError("down")

    failed = LoadDriver(url, [b"a"]).run(LoadSpec(measure_s=0.2), broken)
    assert failed.metrics_before == "" and failed.problems == {"metrics scrape: OSError": 2}


def test_no_answer_and_timeouts_are_failures_without_a_status(url: str) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    refused = LoadDriver(f"http://127.0.0.1:{port}/predictions/m", [b"a"]).run(LoadSpec(measure_s=0.1))
    assert refused.records and all(r.status == NO_ANSWER and not r.ok for r in refused.records)
    assert all(problem.startswith("ConnectionRefusedError") for problem in refused.problems)

    slow = LoadDriver(url, [b"slow"], request_timeout_s=0.05).run(LoadSpec(measure_s=0.1))
    assert slow.records and {r.problem for r in slow.records} == {"TimeoutError: "}


def test_background_load_runs_until_the_block_ends(url: str) -> None:
    driver = LoadDriver(url, [b"a", b"fail"])
    with BackgroundLoad(driver, users=2) as load:
        time.sleep(0.3)
        assert load.records, "records grow while the block runs"
    count = len(load.records)
    time.sleep(0.1)
    assert len(load.records) == count, "nothing is sent after the block"
    assert {r.status for r in load.records} == {200, 503}
    assert all(isinstance(r, Record) for r in load.records)
    assert all(r.body == b'{"code": 503}' for r in load.records if r.status == 503)


def test_per_request_headers_are_built_from_each_request_s_due_time(url: str) -> None:
    asked: list[float] = []

    def deadline(due_epoch: float) -> dict[str, str]:
        asked.append(due_epoch)
        return {"X-Request-Deadline-Ms": f"{due_epoch * 1000 + 300:.0f}"}

    driver = LoadDriver(url, [b"a"], headers={"Authorization": "Bearer k"}, per_request=deadline)
    head, _, body = driver.message(0, 1_700_000_000.0).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /predictions/m HTTP/1.1" and body == b"a"
    assert lines[1] == b"X-Request-Deadline-Ms: 1700000000300"
    assert b"Authorization: Bearer k" in lines and b"Content-Length: 1" in lines
    assert LoadDriver(url, [b"a"]).message(0, 0.0) == LoadDriver(url, [b"a"]).messages[0]

    asked.clear()
    result = driver.run(LoadSpec(rate_rps=50, measure_s=0.4))
    assert result.records and all(r.ok for r in result.records)
    assert len(asked) == len(result.records) and len(set(asked)) == len(asked), "one per request"
    assert sorted(asked) == pytest.approx(sorted(r.start for r in result.records), abs=0.01)
