"""What the load client costs per request, next to a threaded ``requests.Session`` loop.

On a 2-core machine the load generator's CPU is taken from the server it measures, so
the client's CPU time per request matters as much as its request rate. Both clients here
talk to the same tiny keep-alive HTTP/1.1 server answering a fixed small JSON body; it
runs in its own process, so ``time.process_time()`` of this process is the client alone.

    tsbatch bench client  # make bench-client
    tsbatch bench client --concurrency 16 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection

import requests

from tsbatch.client.load import LoadDriver, LoadSpec

REQUEST_BODY = b'{"text": "what is my balance"}'
ANSWER_BODY = b'{"intent": "balance", "score": 0.97}'
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(ANSWER_BODY),
    ANSWER_BODY,
)


# ---------------------------------------------------------------- the local server (own process)
async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Keep-alive: every request on the connection gets the fixed answer."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            writer.write(ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _serve(port_out: Connection) -> None:
    async def run() -> None:
        server = await asyncio.start_server(_answer, "127.0.0.1", 0)
        port_out.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(run())


@contextmanager
def local_server() -> Iterator[str]:
    """The URL of a fixed-answer keep-alive server in a child process, for the block's length."""
    context = multiprocessing.get_context("spawn")
    port_in, port_out = context.Pipe(duplex=False)
    process = context.Process(target=_serve, args=(port_out,), daemon=True)
    process.start()
    try:
        if not port_in.poll(30):
            raise RuntimeError("the local server did not start")
        yield f"http://127.0.0.1:{port_in.recv()}/predictions/echo"
    finally:
        process.terminate()
        process.join(timeout=5)


# ---------------------------------------------------------------- the two clients
@dataclass(frozen=True)
class ClientCost:
    client: str
    requests: int  # answered with 200
    seconds: float
    cpu_s: float  # this process's CPU time (user + system) over the run

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_us_per_request(self) -> float:
        return 1e6 * self.cpu_s / self.requests if self.requests else float("nan")


def timed(client: str, run: Callable[[], int]) -> ClientCost:
    """CPU and wall time around ``run`` (which returns how many requests succeeded)."""
    cpu, wall = time.process_time(), time.perf_counter()
    done = run()
    return ClientCost(client, done, time.perf_counter() - wall, time.process_time() - cpu)


def raw_socket_cost(url: str, concurrency: int, seconds: float) -> ClientCost:
    driver = LoadDriver(url, [REQUEST_BODY], content_types="application/json")

    def run() -> int:
        return sum(record.ok for record in driver.run(LoadSpec(concurrency, measure_s=seconds)).records)

    return timed("raw-socket asyncio (tsbatch)", run)


def requests_cost(url: str, concurrency: int, seconds: float) -> ClientCost:
    headers = {"Content-Type": "application/json"}

    def user(deadline: float, done: list[int]) -> None:
        with requests.Session() as session:
            while time.perf_counter() < deadline:
                done.append(session.post(url, data=REQUEST_BODY, headers=headers, timeout=30).status_code)

    def run() -> int:
        done: list[int] = []
        deadline = time.perf_counter() + seconds
        users = [threading.Thread(target=user, args=(deadline, done)) for _ in range(concurrency)]
        for thread in users:
            thread.start()
        for thread in users:
            thread.join()
        return done.count(200)

    return timed("requests.Session threads", run)


def format_costs(ours: ClientCost, theirs: ClientCost) -> str:
    rows = [
        f"{'client':<30}{'requests':>10}{'req/s':>10}{'CPU s':>8}{'CPU us/req':>12}",
        *(
            f"{c.client:<30}{c.requests:>10}{c.requests_per_s:>10.0f}{c.cpu_s:>8.2f}{c.cpu_us_per_request:>12.1f}"
            for c in (ours, theirs)
        ),
        f"requests.Session / raw socket: {theirs.cpu_us_per_request / ours.cpu_us_per_request:.1f}x the CPU "
        f"per request, {theirs.requests_per_s / ours.requests_per_s:.2f}x the request rate",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Measure the CPU the toolkit's load client spends per request against a threaded "
        "requests loop, both against the same small local HTTP server."
    )
    parser.add_argument("--concurrency", type=int, default=8, help="connections / threads (default 8)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per client (default 2)")
    args = parser.parse_args(argv)
    with local_server() as url:
        print(
            f"[bench] {args.concurrency} connections for {args.seconds:g} s per client against a local "
            "keep-alive server in its own process (fixed small JSON answer); CPU is this process's only",
            flush=True,
        )
        ours = raw_socket_cost(url, args.concurrency, args.seconds)
        theirs = requests_cost(url, args.concurrency, args.seconds)
    print(format_costs(ours, theirs))
    return 0 if ours.requests and theirs.requests else 1
