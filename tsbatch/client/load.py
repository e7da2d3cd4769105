"""A small closed-loop HTTP/1.1 load client for benchmarks.

Benchmarks on a 2-core machine share the CPU with the server, so the client must be
cheap: one asyncio loop, raw keep-alive connections, no per-request object churn
beyond parsing the status line and Content-Length. Latencies are exact (no buckets).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse


@dataclass
class LoadResult:
    """Every request of the measured window, after the warm-up."""

    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    window_s: float = 0.0

    @property
    def completed(self) -> int:
        return len(self.latencies_ms)

    @property
    def errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status != 200)

    @property
    def throughput(self) -> float:
        return self.completed / self.window_s if self.window_s else 0.0

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile (q in 0..100) of the exact latencies."""
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        rank = max(1, int(-(-q * len(ordered) // 100)))
        return ordered[min(rank, len(ordered)) - 1]


async def _one_client(
    host: str,
    port: int,
    request_heads: Sequence[bytes],
    bodies: Sequence[bytes],
    offset: int,
    measure_from: float,
    stop_at: float,
    result: LoadResult,
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    index = offset
    try:
        while time.perf_counter() < stop_at:
            slot = index % len(bodies)
            index += 1
            started = time.perf_counter()
            writer.write(request_heads[slot] + bodies[slot])
            await writer.drain()
            status_line = await reader.readline()
            status = int(status_line.split()[1])
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length:
                await reader.readexactly(length)
            finished = time.perf_counter()
            if started >= measure_from and finished <= stop_at:
                result.latencies_ms.append(1000 * (finished - started))
                result.statuses[status] = result.statuses.get(status, 0) + 1
    finally:
        writer.close()


def closed_loop(
    url: str,
    bodies: Sequence[bytes],
    headers: dict[str, str],
    concurrency: int,
    duration_s: float,
    warmup_s: float,
) -> LoadResult:
    """``concurrency`` clients each send the next body as soon as the last answer came."""
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    heads = []
    for body in bodies:
        lines = [f"POST {parsed.path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        heads.append(("\r\n".join(lines) + "\r\n\r\n").encode())
    result = LoadResult(window_s=duration_s)

    async def run() -> None:
        now = time.perf_counter()
        measure_from, stop_at = now + warmup_s, now + warmup_s + duration_s
        await asyncio.gather(
            *(
                _one_client(host, port, heads, bodies, i * 7, measure_from, stop_at, result)
                for i in range(concurrency)
            )
        )

    asyncio.run(run())
    return result
