"""The SLA gate as plain functions: exact percentiles over a measured window, target checks.

Locust's own statistics round response times into buckets before computing percentiles,
so the gate keeps every request's exact response time (a :class:`Sample`) and computes
the figures here, with the toolkit's one nearest-rank :func:`~tsbatch.sla.percentile.percentile`:
always a latency that really happened, erring high on small samples (the safe side for a gate).

The measured window excludes the ramp-up: only requests *sent* at or after the window
start (and before its end) count. Throughput is successful requests per second of window.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tsbatch.sla.diagnosis import diagnose
from tsbatch.sla.percentile import percentile
from tsbatch.sla.profiles import Sla
from tsbatch.sla.server import ServerFigures

LATENCY_FIGURES = ("p50_ms", "p95_ms", "p99_ms")
FIGURE_TITLES = {
    "p50_ms": "p50 latency (ms)",
    "p95_ms": "p95 latency (ms)",
    "p99_ms": "p99 latency (ms)",
    "max_error_rate": "error rate",
    "min_throughput_rps": "throughput (req/s)",
    "min_mean_batch_size": "mean batch size (server)",
    "max_queue_ms": "queue time (server, ms)",
    "max_worker_restarts": "worker restarts (server)",
}
FIGURE_UNITS = {
    "p50_ms": " ms",
    "p95_ms": " ms",
    "p99_ms": " ms",
    "max_error_rate": "",
    "min_throughput_rps": " req/s",
    "min_mean_batch_size": "",
    "max_queue_ms": " ms",
    "max_worker_restarts": "",
}


@dataclass(frozen=True)
class Sample:
    """One request: which model, when it was sent (epoch s), how long it took, whether it passed.

    ``response_time_ms`` is ``None`` for a request that was due but never sent (the open-loop
    generator's in-flight cap was full): it counts as an error but has no latency.
    """

    model: str
    start: float
    response_time_ms: float | None
    ok: bool

    def as_row(self) -> list:
        return [self.model, self.start, self.response_time_ms, self.ok]

    @classmethod
    def from_row(cls, row: Sequence) -> Sample:
        model, start, response_time_ms, ok = row
        return cls(
            str(model), float(start), None if response_time_ms is None else float(response_time_ms), bool(ok)
        )


@dataclass(frozen=True)
class Window:
    """The measured interval ``[start, end)`` in epoch seconds; ``start is None`` until ramp-up ends."""

    start: float | None
    end: float

    @property
    def seconds(self) -> float:
        return 0.0 if self.start is None else max(0.0, self.end - self.start)

    def contains(self, moment: float) -> bool:
        return self.start is not None and self.start <= moment < self.end


@dataclass(frozen=True)
class Measured:
    """What one model achieved inside the window (latencies ``None`` when nothing answered)."""

    model: str
    requests: int
    failures: int
    window_s: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None

    @property
    def error_rate(self) -> float | None:
        return self.failures / self.requests if self.requests else None

    @property
    def throughput_rps(self) -> float | None:
        if self.window_s <= 0:
            return None
        return (self.requests - self.failures) / self.window_s

    def figure(self, name: str) -> float | None:
        if name == "max_error_rate":
            return self.error_rate
        if name == "min_throughput_rps":
            return self.throughput_rps
        return getattr(self, name)


def latency_percentiles(latencies: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """p50, p95 and p99 of sorted latencies; all ``None`` when nothing answered."""
    if not latencies:
        return None, None, None
    p50, p95, p99 = (percentile(latencies, q, is_sorted=True) for q in (50, 95, 99))
    return p50, p95, p99


def measure(samples: Iterable[Sample], model: str, window: Window) -> Measured:
    """Figures of ``model`` over the requests sent inside ``window``."""
    latencies: list[float] = []
    requests = failures = 0
    for sample in samples:
        if sample.model != model or not window.contains(sample.start):
            continue
        requests += 1
        failures += not sample.ok
        if sample.response_time_ms is not None:
            latencies.append(sample.response_time_ms)
    latencies.sort()
    return Measured(model, requests, failures, window.seconds, *latency_percentiles(latencies))


@dataclass(frozen=True)
class Check:
    """One figure against its target: ``min_*`` figures are floors, every other a ceiling."""

    figure: str
    target: float
    measured: float | None
    passed: bool

    @property
    def comparator(self) -> str:
        return ">=" if self.figure.startswith("min_") else "<="

    def describe(self) -> str:
        unit = FIGURE_UNITS[self.figure]
        value = "no data" if self.measured is None else format_value(self.figure, self.measured) + unit
        return f"{self.figure} = {value}, target {self.comparator} {format_value(self.figure, self.target)}{unit}"


@dataclass(frozen=True)
class Verdict:
    """A model's checks, with the server's figures over the same window when they could be read;
    ``unjudged`` names the server targets left out because they could not."""

    model: str
    profile: str
    measured: Measured
    checks: tuple[Check, ...] = field(default_factory=tuple)
    server: ServerFigures | None = None
    unjudged: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.measured.requests > 0 and all(check.passed for check in self.checks)

    @property
    def breaches(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]

    @property
    def diagnosis(self) -> list[str]:
        """Why the latency targets broke, from the server figures (empty when none broke)."""
        latency = [
            (c.figure, c.measured) for c in self.breaches if c.figure in LATENCY_FIGURES and c.measured
        ]
        return diagnose(latency, self.measured.p50_ms, self.server) if latency else []


def check_figure(figure: str, target: float, measured: float | None) -> Check:
    if measured is None:
        return Check(figure, target, None, False)
    passed = measured >= target if figure.startswith("min_") else measured <= target
    return Check(figure, target, measured, passed)


def evaluate(measured: Measured, sla: Sla, server: ServerFigures | None = None) -> Verdict:
    """Client figures always; a server target only when its figure could be read (a metrics
    endpoint or a management key out of reach leaves it unjudged, named, not failed)."""
    figures = (*LATENCY_FIGURES, "max_error_rate", "min_throughput_rps")
    checks = [check_figure(f, getattr(sla, f), measured.figure(f)) for f in figures]
    readable = {f: None if server is None else server.figure(f) for f in sla.server_targets}
    checks.extend(
        check_figure(f, sla.server_targets[f], value) for f, value in readable.items() if value is not None
    )
    unjudged = tuple(f for f, value in readable.items() if value is None)
    return Verdict(measured.model, sla.profile, measured, tuple(checks), server, unjudged)


def evaluate_all(
    samples: Sequence[Sample],
    slas: dict[str, Sla],
    models: Iterable[str],
    window: Window,
    server: Mapping[str, ServerFigures | None] | None = None,
) -> list[Verdict]:
    """A verdict for every model under test (each must have an SLA in the profile)."""
    figures = server or {}
    return [evaluate(measure(samples, model, window), slas[model], figures.get(model)) for model in models]


def gate_exit_code(verdicts: Sequence[Verdict]) -> int:
    """0 when every model met every target; 1 on any breach, or when nothing was measured."""
    return 0 if verdicts and all(v.passed for v in verdicts) else 1


# ---------------------------------------------------------------- presentation
def format_value(figure: str, value: float) -> str:
    """Error rates as percentages, latencies and throughputs to a tenth."""
    if figure == "max_error_rate":
        return f"{value * 100:.2f}%"
    return f"{value:.1f}"


def table_rows(verdicts: Sequence[Verdict]) -> list[dict[str, str]]:
    """One row per model and figure: what the console table and the web UI both show."""
    rows = []
    for verdict in verdicts:
        for check in verdict.checks:
            rows.append(
                {
                    "model": verdict.model,
                    "figure": FIGURE_TITLES[check.figure],
                    "target": f"{check.comparator} {format_value(check.figure, check.target)}",
                    "measured": "no data"
                    if check.measured is None
                    else format_value(check.figure, check.measured),
                    "result": "PASS" if check.passed else "FAIL",
                }
            )
    return rows


def breach_summary(verdicts: Sequence[Verdict]) -> list[str]:
    lines = []
    for verdict in verdicts:
        if verdict.measured.requests == 0:
            lines.append(f"{verdict.model}: no requests in the measured window")
            continue
        lines.extend(f"{verdict.model}: {check.describe()}" for check in verdict.breaches)
    return lines


def diagnosis_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """``model: cause`` for every latency breach."""
    return [f"{v.model}: {cause}" for v in verdicts for cause in v.diagnosis]


def unjudged_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """The server targets each model left out because their figures could not be read."""
    return [f"{v.model}: {', '.join(v.unjudged)} (no server figures)" for v in verdicts if v.unjudged]


def format_table(verdicts: Sequence[Verdict], window: Window) -> str:
    """The console table printed at the end of a headless run, with the overall verdict last."""
    profile = verdicts[0].profile if verdicts else "?"
    header = ("model", "figure", "target", "measured", "result")
    rows = [tuple(row.values()) for row in table_rows(verdicts)]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    line = "  ".join(f"{{:<{width}}}" for width in widths)
    counts = ", ".join(
        f"{v.model} {v.measured.requests} req / {v.measured.failures} failed" for v in verdicts
    )
    out = [
        f"SLA gate (profile {profile}): measured window {window.seconds:.1f} s after ramp-up; {counts}",
        line.format(*header),
        line.format(*("-" * width for width in widths)),
    ]
    out.extend(line.format(*row) for row in rows)
    breaches = breach_summary(verdicts)
    if not verdicts:
        out.append("SLA gate: FAIL (no model under test)")
    elif breaches:
        out.append("SLA gate: FAIL")
        out.extend(f"  breached: {text}" for text in breaches)
    else:
        out.append("SLA gate: PASS (every model met every target)")
    out.extend(f"  why: {text}" for text in diagnosis_lines(verdicts))
    out.extend(f"  not judged: {text}" for text in unjudged_lines(verdicts))
    return "\n".join(out)


def report_json(
    verdicts: Sequence[Verdict], window: Window, server_view: Mapping[str, Any] | None = None
) -> str:
    """Machine-readable verdict for CI artifacts (``--sla-report``), with the server's side."""
    document = {
        "passed": gate_exit_code(verdicts) == 0,
        "window_s": window.seconds,
        "server_view": server_view,
        "models": [
            {
                "model": v.model,
                "profile": v.profile,
                "passed": v.passed,
                "measured": {
                    **asdict(v.measured),
                    "error_rate": v.measured.error_rate,
                    "throughput_rps": v.measured.throughput_rps,
                },
                "checks": [{**asdict(c), "comparator": c.comparator} for c in v.checks],
                "server": None if v.server is None else v.server.as_dict(),
                "unjudged": list(v.unjudged),
                "diagnosis": v.diagnosis,
            }
            for v in verdicts
        ],
    }
    return json.dumps(document, indent=2)
