"""The HTTP load client of the toolkit: benchmarks, the tuner and the integration tests.

Why raw sockets: on the 2-core machines this toolkit targets, the load generator shares the
CPU with TorchServe's frontend and workers, so every cycle the client spends on a request
is taken from the server it measures. One asyncio loop over keep-alive HTTP/1.1
connections, with each request's bytes built once, keeps that cost per request small
(``tsbatch bench client`` compares it with a threaded ``requests`` loop).

Two shapes of load (:class:`LoadSpec`): a closed loop of N users, each sending its next
request when the last answer came, or an open loop of Poisson arrivals at a rate. In the
open loop a request's latency counts from when it was *due*, so queueing in the client is
not hidden (no coordinated omission), and a request due while ``max_in_flight`` are
already out is failed without a latency. A warm-up precedes the measured window.

Every request becomes a :class:`Record`, which *is* an SLA-gate ``Sample``: the figures
come from ``tsbatch.sla.gate`` and ``tsbatch.sla.percentile`` as for the load gate.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tsbatch.client.schedule import poisson_arrivals
from tsbatch.sla.gate import Measured, Sample, Window, measure
from tsbatch.sla.percentile import percentile

NO_ANSWER = 0  # the status of a request that got no HTTP answer (timeout, connection error, cap full)
ResponseCheck = Callable[[int, bytes], str | None]
# The headers one request carries beside the fixed ones, from when it was due (epoch seconds).
PerRequestHeaders = Callable[[float], Mapping[str, str]]
CLIENT_ERRORS = (TimeoutError, OSError, EOFError, ValueError, IndexError, asyncio.LimitOverrunError)


def expect_ok(status: int, body: bytes) -> str | None:
    """The default check: any answer but 200 is a failure."""
    return None if status == 200 else f"HTTP {status}"


@dataclass(frozen=True)
class Record(Sample):
    """One request as the gate sees it, plus what the answer was. ``body`` is kept for
    failed requests only (the reason is in it); a success's body is not held."""

    status: int = NO_ANSWER
    problem: str | None = None
    body: bytes = b""

    @property
    def finished(self) -> float:
        """Epoch seconds when the answer (or the failure) came."""
        return self.start + (self.response_time_ms or 0.0) / 1000


@dataclass(frozen=True)
class LoadSpec:
    """Closed loop at ``concurrency`` users, or open loop at ``rate_rps`` when that is set."""

    concurrency: int = 1
    rate_rps: float | None = None
    warmup_s: float = 0.0
    measure_s: float = 10.0

    def describe(self) -> str:
        if self.rate_rps:
            return f"open loop at {self.rate_rps:g} req/s (Poisson arrivals)"
        return f"closed loop at concurrency {self.concurrency}"


@dataclass
class LoadResult:
    """Every request of a run (warm-up included) and the measured window."""

    model: str
    records: list[Record]
    window: Window
    problems: dict[str, int] = field(default_factory=dict)  # failure text -> count, whole run
    metrics_before: str = ""  # the /metrics text at the window's start and end, when scraped
    metrics_after: str = ""

    def figures(self) -> Measured:
        """Requests, failures, throughput and p50/p95/p99 of the window, as the gate computes them."""
        return measure(self.records, self.model, self.window)

    def latency_ms(self, q: float) -> float | None:
        """Nearest-rank percentile ``q`` (0..100) of the window's answered requests."""
        latencies = [
            r.response_time_ms
            for r in self.records
            if r.response_time_ms is not None and self.window.contains(r.start)
        ]
        return percentile(latencies, q) if latencies else None

    def statuses(self) -> dict[int, int]:
        """How many requests of the window got each HTTP status (``NO_ANSWER`` for none)."""
        counts: dict[int, int] = {}
        for record in self.records:
            if self.window.contains(record.start):
                counts[record.status] = counts.get(record.status, 0) + 1
        return counts


# ---------------------------------------------------------------- one connection
async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """Status, body and whether the server keeps the connection open, of one HTTP/1.1 answer
    (Content-Length, chunked, or a body up to the close)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    status = int(lines[0].split()[1])
    length, chunked, keep_alive = None, False, True
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value
        elif name == b"connection":
            keep_alive = value != b"close"
    if chunked:
        return status, await _read_chunks(reader), keep_alive
    if length is None:
        return status, (b"" if keep_alive else await reader.read()), keep_alive
    return status, await reader.readexactly(length), keep_alive


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the CRLF after the chunk
    while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers up to the empty line
        pass
    return b"".join(parts)


class Connection:
    """One keep-alive connection, one request at a time; opened on first use and again
    after the server closed it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, message: bytes) -> tuple[int, bytes]:
        """Send one whole request (head and body) and read its answer."""
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        try:
            self.writer.write(message)
            await self.writer.drain()
            status, body, keep_alive = await read_response(self.reader)
        except BaseException:
            self.close()
            raise
        if not keep_alive:
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# ---------------------------------------------------------------- the driver
class LoadDriver:
    """POSTs ``bodies`` in turn to ``url`` and records every request.

    ``content_types`` is one type for every body or one per body; ``check`` judges each
    answer (a problem text, or None when it passed); ``model`` labels the records (default:
    the URL's last path segment, as in ``/predictions/<model>``); ``per_request`` adds headers
    that depend on when each request was due (a deadline counted from it, say).
    """

    def __init__(
        self,
        url: str,
        bodies: Sequence[bytes],
        *,
        content_types: str | Sequence[str] = "application/octet-stream",
        headers: dict[str, str] | None = None,
        model: str | None = None,
        check: ResponseCheck = expect_ok,
        request_timeout_s: float = 30.0,
        max_in_flight: int = 256,
        per_request: PerRequestHeaders | None = None,
    ) -> None:
        if not bodies:
            raise ValueError("no request bodies to send")
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.model = model or parts.path.rstrip("/").rsplit("/", 1)[-1]
        self.check, self.request_timeout_s, self.max_in_flight = check, request_timeout_s, max_in_flight
        self.per_request = per_request
        types = [content_types] * len(bodies) if isinstance(content_types, str) else content_types
        fixed = f"POST {parts.path or '/'} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in (headers or {}).items()
        )
        self.messages = [
            f"{fixed}Content-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
            for body, kind in zip(bodies, types, strict=True)
        ]
        self.records: list[Record] = []
        self.problems: dict[str, int] = {}

    def reset(self) -> None:
        self.records, self.problems = [], {}

    def add(self, record: Record) -> None:
        self.records.append(record)
        if record.problem is not None:
            self.count_problem(record.problem)

    def count_problem(self, problem: str) -> None:
        key = problem[:80]
        self.problems[key] = self.problems.get(key, 0) + 1

    def message(self, index: int, due_epoch: float) -> bytes:
        """Request ``index``'s bytes, with its per-request headers (when set) spliced in after
        the request line: only those are built per request, the rest was built once."""
        message = self.messages[index % len(self.messages)]
        if self.per_request is None:
            return message
        extra = "".join(f"{name}: {value}\r\n" for name, value in self.per_request(due_epoch).items())
        cut = message.index(b"\r\n") + 2
        return message[:cut] + extra.encode() + message[cut:]

    async def send(self, connection: Connection, index: int, due: float | None = None) -> None:
        """One request; ``due`` (perf_counter) is when the open loop meant to send it."""
        begin = time.perf_counter() if due is None else due
        start = time.time() - (time.perf_counter() - begin)
        status, body = NO_ANSWER, b""
        try:
            status, body = await asyncio.wait_for(
                connection.request(self.message(index, start)), self.request_timeout_s
            )
            problem = self.check(status, body)
        except CLIENT_ERRORS as exc:
            connection.close()
            problem = f"{type(exc).__name__}: {exc}"
        latency_ms = 1000 * (time.perf_counter() - begin)
        self.add(
            Record(self.model, start, latency_ms, problem is None, status, problem, body if problem else b"")
        )

    async def closed_loop(self, users: int, keep_going: Callable[[], bool]) -> None:
        """``users`` connections, each sending its next request as soon as the last answer came."""
        step = max(1, len(self.messages) // users)

        async def user(index: int) -> None:
            connection = Connection(self.host, self.port)
            try:
                while keep_going():
                    await self.send(connection, index)
                    index += 1
            finally:
                connection.close()

        await asyncio.gather(*(user(i * step) for i in range(users)))

    async def open_loop(self, rate_rps: float, end_epoch: float) -> None:
        """Poisson arrivals at ``rate_rps`` until ``end_epoch``, on a pool of idle connections."""
        rng = random.Random(0)
        idle: list[Connection] = []
        in_flight: set[asyncio.Task[None]] = set()

        async def pooled(index: int, due: float) -> None:
            connection = idle.pop() if idle else Connection(self.host, self.port)
            await self.send(connection, index, due)
            idle.append(connection)

        index = 0
        for due in poisson_arrivals(rate_rps, time.perf_counter(), rng):
            if time.time() >= end_epoch:
                break
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if len(in_flight) >= self.max_in_flight:
                self.add(Record(self.model, time.time(), None, False, NO_ANSWER, "in-flight cap full"))
                continue
            task = asyncio.create_task(pooled(index, due))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            index += 1
        if in_flight:
            await asyncio.gather(*in_flight)
        for connection in idle:
            connection.close()

    def run(self, load: LoadSpec, scrape_metrics: Callable[[], str] | None = None) -> LoadResult:
        """Warm-up, then the measured window; ``scrape_metrics`` (when given) is read at both
        edges of the window, for counters such as the mean formed batch."""
        return asyncio.run(self._run(load, scrape_metrics))

    async def _run(self, load: LoadSpec, scrape_metrics: Callable[[], str] | None) -> LoadResult:
        self.reset()
        begin = time.time() + load.warmup_s
        window = Window(begin, begin + load.measure_s)
        scraped: dict[float, str] = {}

        async def scrape_at(moment: float, scrape: Callable[[], str]) -> None:
            await asyncio.sleep(max(0.0, moment - time.time()))
            try:
                scraped[moment] = await asyncio.to_thread(scrape)
            except Exception as exc:  # a failed scrape only loses what the counters tell
                self.count_problem(f"metrics scrape: {type(exc).__name__}")

        scrapers = []
        if scrape_metrics is not None:
            scrapers = [asyncio.create_task(scrape_at(edge, scrape_metrics)) for edge in (begin, window.end)]
        if load.rate_rps:
            await self.open_loop(load.rate_rps, window.end)
        else:
            await self.closed_loop(load.concurrency, lambda: time.time() < window.end)
        await asyncio.gather(*scrapers)
        return LoadResult(
            self.model,
            self.records,
            window,
            self.problems,
            scraped.get(begin, ""),
            scraped.get(window.end, ""),
        )


class BackgroundLoad:
    """A closed loop of ``users`` on its own thread while the ``with`` block runs, for tests
    that act on the server meanwhile (kill a worker, sample memory). ``records`` grows live;
    on exit every request in flight is let finish."""

    def __init__(self, driver: LoadDriver, users: int) -> None:
        self.driver = driver
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(driver.closed_loop(users, lambda: not self._stop.is_set())),
            name=f"load-{driver.model}",
            daemon=True,
        )

    @property
    def records(self) -> list[Record]:
        return self.driver.records

    def __enter__(self) -> BackgroundLoad:
        self.driver.reset()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.driver.request_timeout_s + 5)
