"""The sweep's measurements: one row per point, as kept in sweep.csv and read back from it.

The plots and the summary are made from the rows read back, so what they show is what the
CSV holds.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass
class SweepRow:
    """One (model, scenario, precision, batch size) measurement: a line of sweep.csv."""

    model: str
    scenario: str
    precision: str
    device: str
    batch_size: int
    status: str  # ok | oom | error
    iterations: int = 0
    latency_mean_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    throughput_sps: float | None = None
    peak_mem_mb: float | None = None
    mem_kind: str = ""
    max_abs_diff: float | None = None  # against the same sample alone at batch 1, same precision
    cosine_min: float | None = None
    top1_agreement: float | None = None
    fp32_max_abs_diff: float | None = None  # against the same sample alone at batch 1 in fp32
    fp32_top1_agreement: float | None = None
    output_dtype: str = ""
    note: str = ""


CSV_FIELDS = [f.name for f in fields(SweepRow)]


@dataclass
class SweepResult:
    rows: list[SweepRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # precisions skipped, models missing


def curves(rows: Sequence[SweepRow]) -> Iterator[tuple[tuple[str, str, str], list[SweepRow]]]:
    """Rows grouped by (model, scenario, precision), in first-seen order."""
    groups: dict[tuple[str, str, str], list[SweepRow]] = {}
    for row in rows:
        groups.setdefault((row.model, row.scenario, row.precision), []).append(row)
    yield from groups.items()


def write_csv(rows: Sequence[SweepRow], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})


def read_csv(path: Path) -> list[SweepRow]:
    """Rows back from sweep.csv, typed (what the plots and the summary are made from)."""
    types = {f.name: f.type for f in fields(SweepRow)}
    rows = []
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for key, text in raw.items():
                kind = str(types[key])
                if kind == "int":
                    values[key] = int(text)
                elif "float" in kind:
                    values[key] = float(text) if text != "" else None
                else:
                    values[key] = text
            rows.append(SweepRow(**values))
    return rows
