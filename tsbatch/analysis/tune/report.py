"""The tuner's results: a CSV per model (read back for the plot), summary.md, the
recommended ``models=`` entry, and the winners applied to a config.properties if asked.

Also the exit status: 0 when every model has a winner, 2 when some model has none.
"""

from __future__ import annotations

import csv
import math
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from tsbatch.analysis.options import decode_threads_value
from tsbatch.analysis.selection import (
    DECODE_THREADS,
    Selection,
    TunePoint,
    batch_one_baseline,
    select_configuration,
)
from tsbatch.config.properties import parse_entries, update_model_settings
from tsbatch.settings.batch import QUEUE_KEY, TUNED_KEYS, BatchSettings
from tsbatch.sla.profiles import Sla

# A point's settings as the CSV spells them (its key, then its decode pool last), then its figures.
SETTINGS_FIELDS = ["batch_size", "max_batch_delay_ms", "workers"]
FIGURE_FIELDS = [f.name for f in fields(TunePoint) if f.name not in ("model", "settings")]
CSV_FIELDS = ["model", *SETTINGS_FIELDS, *FIGURE_FIELDS, "decode_threads", "meets_sla", "winner", "verdict"]


def point_row(point: TunePoint) -> dict[str, Any]:
    """One point as a CSV row (None as an empty cell)."""
    values = {
        "model": point.model,
        **dict(zip(SETTINGS_FIELDS, point.settings.key, strict=True)),
        **{name: getattr(point, name) for name in FIGURE_FIELDS},
        "decode_threads": point.decode_threads,
    }
    return {k: ("" if v is None else v) for k, v in values.items()}


def write_points_csv(selection: Selection, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for verdict in selection.verdicts:
            writer.writerow(
                {
                    **point_row(verdict.point),
                    "meets_sla": verdict.meets_sla,
                    "winner": verdict.won,
                    "verdict": verdict.reason,
                }
            )


def read_points_csv(path: Path) -> list[TunePoint]:
    """The points back from a tune CSV (the plot is drawn from these)."""
    types = {f.name: str(f.type) for f in fields(TunePoint)}
    points = []
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for key in FIGURE_FIELDS:
                text, kind = raw.get(key) or "", types[key]  # a column an older report lacks is empty
                if kind == "int":
                    values[key] = int(text)
                elif kind == "int | None":
                    values[key] = int(text) if text else None
                elif "float" in kind:
                    values[key] = float(text) if text != "" else None
                else:
                    values[key] = text or None
            key = (int(raw[name]) for name in SETTINGS_FIELDS)
            threads = decode_threads_value(raw.get("decode_threads") or "")  # a size or auto
            settings = BatchSettings.for_point(*key, **{DECODE_THREADS: threads})
            points.append(TunePoint(raw.get("model") or "", settings, **values))
    return points


@dataclass
class ModelReport:
    model: str
    sla: Sla
    selection: Selection
    baseline: TunePoint | None
    pruned: list[str]
    csv_path: Path
    plot_path: Path
    current: BatchSettings  # the model's settings in config.properties before tuning

    @property
    def ratio(self) -> float | None:
        winner = self.selection.winner
        if winner is None or self.baseline is None or self.baseline.throughput_rps <= 0:
            return None
        return winner.throughput_rps / self.baseline.throughput_rps


def report_model(
    model: str,
    points: Sequence[TunePoint],
    sla: Sla,
    out_dir: Path,
    pruned: Sequence[str],
    current: BatchSettings,
) -> ModelReport:
    """CSV of every point with its verdict, then the plot drawn from that CSV read back."""
    from tsbatch.analysis.tune.plot import plot_tune

    csv_path = out_dir / f"{model}.csv"
    write_points_csv(select_configuration(points, sla), csv_path)
    selection = select_configuration(read_points_csv(csv_path), sla)
    plot_path = plot_tune(
        selection, out_dir / f"{model}.png", f"{model}: throughput vs p99 ({sla.profile} SLA)"
    )
    return ModelReport(
        model,
        sla,
        selection,
        batch_one_baseline([v.point for v in selection.verdicts], sla),
        list(pruned),
        csv_path,
        plot_path,
        current,
    )


def recommended_entry(properties: Path, reports: Sequence[ModelReport]) -> str:
    """The ``models=`` entry of ``properties`` with every winner applied (file untouched)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "config.properties"
        shutil.copy(properties, copy)
        for report in reports:
            if report.selection.winner is not None:
                update_model_settings(copy, report.model, recommended_settings(report))
        text = copy.read_text()
    lines = text.splitlines(keepends=True)
    entry = next(e for e in parse_entries(text) if e.key == "models")
    return "".join(lines[entry.first_line : entry.last_line + 1])


def queue_size_for(throughput_rps: float, p99_ms: float, batch_size: int) -> int:
    """The job queue that drains within the p99 target at ``throughput_rps``, rounded down,
    and never below one batch: a request queued behind more is answered late anyway."""
    return max(batch_size, math.floor(throughput_rps * p99_ms / 1000))


def recommended_settings(report: ModelReport) -> dict[str, Any]:
    """The winner's settings and the job queue its measured throughput drains within the SLA,
    as a ``models=`` entry spells them."""
    winner = report.selection.winner
    if winner is None:
        return {}
    queue = queue_size_for(winner.throughput_rps, report.sla.p99_ms, winner.settings.batch_size)
    return replace(winner.settings, job_queue_size=queue).entry()


def render_summary(reports: Sequence[ModelReport], meta: dict[str, Any], entry: str) -> str:
    lines = [
        "# Batch tuning through TorchServe",
        "",
        f"- load: {meta['load']}; warm-up {meta['warmup_s']:g} s, measured {meta['measure_s']:g} s per configuration",
        f"- SLA profile `{meta['profile']}` from {meta['sla_file']}; percentiles are nearest-rank over every request "
        "sent in the measured window (failed ones included)",
        "- mean batch = rate of BatchedRequestsTotal over BatchesTotal at the metrics endpoint during the window",
        f"- load generator, TorchServe and its workers share this machine ({meta['cpus']} CPUs); "
        f"tuned in {meta['seconds']:.0f} s",
        "- at batch size 1 the batch delay never applies (a batch of one is sent at once)",
    ]
    for report in reports:
        sla, selection = report.sla, report.selection
        lines += ["", f"## {report.model}", ""]
        lines.append(
            f"SLA ({sla.profile}): p50 <= {sla.p50_ms:g} ms, p95 <= {sla.p95_ms:g} ms, p99 <= {sla.p99_ms:g} ms, "
            f"errors <= {sla.max_error_rate:.2%}, throughput >= {sla.min_throughput_rps:g} rps"
        )
        lines.append("")
        lines.append(f"**{selection.message}**")
        if selection.winner is not None:
            baseline = report.baseline
            if baseline is not None and report.ratio is not None:
                lines.append(
                    f"\n{report.ratio:.2f}x the throughput of the best batch-size-1 configuration meeting the same SLA "
                    f"({baseline.short_label}: {baseline.throughput_rps:.1f} rps, p99 {baseline.p99_ms:.0f} ms)."
                )
            else:
                lines.append(
                    "\nNo batch-size-1 configuration met the SLA: batching is what makes it reachable."
                )
            said = report.current.entry()
            current = {k: said.get(k) for k in (*TUNED_KEYS, DECODE_THREADS, QUEUE_KEY)}
            lines.append(f"\nconfig.properties now: {current}; recommended: {recommended_settings(report)}")
            lines.append(
                f"\n{QUEUE_KEY} = measured throughput x p99 target ({selection.winner.throughput_rps:.1f} rps x "
                f"{sla.p99_ms:g} ms, at least the batch size): a request queued behind more would be answered "
                "late anyway, and past it the frontend answers 503 at once."
            )
        lines += [
            "",
            f"![{report.model}]({report.plot_path.name})",
            "",
            "| batchSize | maxBatchDelay ms | workers | decodeThreads | throughput rps | p50 ms | p95 ms | p99 ms | errors | mean batch | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for verdict in selection.verdicts:
            p = verdict.point
            batch = "-" if p.mean_batch_size is None else f"{p.mean_batch_size:.2f}"
            mark = "**winner** - " if verdict.won else ""
            threads = "as packaged" if p.decode_threads is None else p.decode_threads
            lines.append(
                f"| {p.settings.batch_size} | {p.settings.max_batch_delay_ms} | {p.settings.workers} | {threads} | {p.throughput_rps:.1f} | {p.p50_ms:.0f} | "
                f"{p.p95_ms:.0f} | {p.p99_ms:.0f} | {p.error_rate:.2%} | {batch} | {mark}{verdict.reason} |"
            )
        if report.pruned:
            lines += ["", "Pruned:"] + [f"- {why}" for why in report.pruned]
    lines += [
        "",
        "## Recommended `models=` entry for config.properties",
        "",
        "```properties",
        entry.rstrip("\n"),
        "```",
        "",
    ]
    return "\n".join(lines)


def print_verdicts(report: ModelReport, log: Callable[[str], None] = print) -> None:
    log(f"[tune] {report.selection.message}")
    for verdict in report.selection.verdicts:
        mark = "WINNER" if verdict.won else "lost  "
        log(f"[tune]   {mark} {verdict.point.short_label:<12} {verdict.reason}")
    if report.ratio is not None and report.baseline is not None:
        log(
            f"[tune]   {report.ratio:.2f}x batch size 1 at the same SLA ({report.baseline.short_label}: {report.baseline.throughput_rps:.1f} rps)"
        )


def finish(
    reports: Sequence[ModelReport],
    out_dir: Path,
    meta: dict[str, Any],
    properties: Path,
    apply_to: Path | None,
    log: Callable[[str], None] = print,
) -> int:
    """Write summary.md and recommended.properties, apply the winners if asked; the exit code."""
    entry = recommended_entry(properties, reports)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "recommended.properties").write_text(
        "# Written by `make tune`: the models= entry of config.properties with the winning settings.\n"
        + entry
    )
    (out_dir / "summary.md").write_text(render_summary(reports, meta, entry))
    for report in reports:
        print_verdicts(report, log)
    losers = [r.model for r in reports if r.selection.winner is None]
    if apply_to is not None:
        for report in reports:
            if report.selection.winner is not None:
                update_model_settings(apply_to, report.model, recommended_settings(report))
                log(f"[tune] applied {report.model} {recommended_settings(report)} to {apply_to}")
        log("[tune] rebuild the archives with `make archive` (TorchServe lets the archive's settings win)")
    log(f"[tune] recommended models= entry:\n{entry}")
    log(
        f"[tune] reports in {out_dir}: summary.md, recommended.properties, "
        + ", ".join(f"{r.model}.csv/.png" for r in reports)
    )
    if losers:
        log(f"[tune] FAILED: no configuration meets the SLA for {losers}; nothing applied for them")
        return 2
    return 0
