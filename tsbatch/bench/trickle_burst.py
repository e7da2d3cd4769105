"""Benchmark: deadline shedding under a light trickle broken by bursts, against the same
traffic without deadlines: does shedding drop requests that would have been on time?

Per model and budget: a trickle of one request every ``--gap-ms``, then a burst of
``--burst`` requests at once, ``--bursts`` times; once with no deadline header, once with
each request's ``X-Request-Deadline-Ms`` = its send time + the budget. Per burst request:
answered 200 within the budget without deadlines, and shed (503 ``deadline_exceeded``)
with them; a wrong shed is a burst request shed whose twin (same burst, same place) was
answered in time without deadlines. The server is the repository's store unless
``--model-store`` names another (an older store's archives carry that version's handlers:
the before/after of a change in one sitting).

    tsbatch bench trickle-burst --models resnet18 bert_intent --budgets 40 50
    tsbatch bench trickle-burst --model-store /path/to/main/model-store   # the "before"
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from batchkit.deadlines import DEADLINE_HEADER
from batchkit.errors import DeadlineExceeded
from tsbatch.archive.manifest import load_manifest, workload_for
from tsbatch.server.process import TorchServe, start_instance
from tsbatch.workloads.payloads import Payload


@dataclass(frozen=True)
class Outcome:
    status: int
    latency_ms: float
    shed: bool


@dataclass(frozen=True)
class Comparison:
    """One model at one budget: the burst requests of both runs, place by place."""

    model: str
    budget_ms: float
    plain: list[Outcome]
    with_deadlines: list[Outcome]

    @property
    def in_time(self) -> int:
        return sum(o.status == 200 and o.latency_ms <= self.budget_ms for o in self.plain)

    @property
    def shed(self) -> int:
        return sum(o.shed for o in self.with_deadlines)

    @property
    def wrong_sheds(self) -> int:
        pairs = zip(self.plain, self.with_deadlines, strict=True)
        return sum(d.shed and p.status == 200 and p.latency_ms <= self.budget_ms for p, d in pairs)

    def row(self) -> str:
        worst = max((o.latency_ms for o in self.plain if o.status == 200), default=float("nan"))
        late = sum(o.status == 200 and o.latency_ms > self.budget_ms for o in self.with_deadlines)
        return (
            f"{self.model:<12} {self.budget_ms:>6g} ms {self.in_time:>4}/{len(self.plain):<4} (max {worst:5.1f} ms) "
            f"{self.shed:>4}/{len(self.with_deadlines):<4} {self.wrong_sheds:>6} {late:>10}"
        )


HEADER = (
    f"{'model':<12} {'budget':>9} {'in time, no deadlines':>22} {'shed':>9} {'wrong':>6} {'late 200s':>10}"
)


def send(
    session: requests.Session, url: str, payload: Payload, headers: dict[str, str], budget_ms: float | None
) -> Outcome:
    extra = {"Content-Type": payload.content_type}
    started = time.time()
    if budget_ms is not None:
        extra[DEADLINE_HEADER] = f"{started * 1000 + budget_ms:.0f}"
    response = session.post(url, data=payload.body, headers={**headers, **extra}, timeout=60)
    return Outcome(
        response.status_code,
        (time.time() - started) * 1000,
        response.status_code == 503 and DeadlineExceeded.code in response.text,
    )


def run_pattern(
    server: TorchServe, model: str, pool: list[Payload], budget_ms: float | None, args: argparse.Namespace
) -> list[Outcome]:
    """The trickle-and-burst traffic once; the burst requests' outcomes, in order."""
    url = f"{server.url('inference')}/predictions/{model}"
    headers = server.client.headers()
    sessions = [requests.Session() for _ in range(args.burst)]
    outcomes: list[Outcome] = []
    for burst in range(args.bursts):
        for step in range(args.trickle):
            send(sessions[0], url, pool[step % len(pool)], headers, budget_ms)
            time.sleep(args.gap_ms / 1000)
        results: list[Outcome | None] = [None] * args.burst

        def one(place: int, burst: int = burst, results: list[Outcome | None] = results) -> None:
            payload = pool[(burst * args.burst + place) % len(pool)]
            results[place] = send(sessions[place], url, payload, headers, budget_ms)

        threads = [threading.Thread(target=one, args=(place,)) for place in range(args.burst)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        outcomes.extend(result for result in results if result is not None)
        time.sleep(args.gap_ms / 1000)
    for session in sessions:
        session.close()
    return outcomes


def compare(server: TorchServe, model: str, budget_ms: float, args: argparse.Namespace) -> Comparison:
    pool = workload_for(model, load_manifest()).pool(16)
    for payload in pool[:4]:  # the first answers pay for nothing of the pattern
        server.client.predict(model, payload.body, payload.content_type)
    plain = run_pattern(server, model, pool, None, args)
    return Comparison(model, budget_ms, plain, run_pattern(server, model, pool, budget_ms, args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="A light trickle broken by bursts, without and with deadlines of send time + budget: "
        "burst requests answered in time without deadlines, shed with them, and wrong sheds."
    )
    parser.add_argument("--models", nargs="+", default=["resnet18", "bert_intent"])
    parser.add_argument("--budgets", nargs="+", type=float, default=[40.0, 50.0], help="ms after sending")
    parser.add_argument("--bursts", type=int, default=15)
    parser.add_argument("--burst", type=int, default=8, help="requests sent at once in a burst")
    parser.add_argument("--trickle", type=int, default=10, help="single requests between bursts")
    parser.add_argument("--gap-ms", type=float, default=100.0, help="between trickle requests")
    parser.add_argument("--model-store", type=Path, help="default: the repository's (its archives' handlers)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    manifest = load_manifest()
    store = args.model_store or manifest.model_store
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-trickle-") as tmp:
        for model in args.models:
            print(f"[bench] serving {model} from {store} ...")
            server = start_instance(Path(tmp) / model, store, [model])
            try:
                for budget in args.budgets:
                    print(f"[bench]   {model} at {budget:g} ms: without, then with deadlines ...")
                    rows.append(compare(server, model, budget, args))
            finally:
                server.stop()
    print(
        f"\n{args.bursts} bursts of {args.burst} after {args.trickle} single requests {args.gap_ms:g} ms apart; "
        f"burst requests only (store {store})"
    )
    print(HEADER)
    for row in rows:
        print(row.row())
    return 0
