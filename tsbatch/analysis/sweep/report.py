"""What a sweep leaves behind: sweep.csv, one plot per model and precision, and summary.md
naming each curve's knee and the largest batch within the latency budget."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsbatch.analysis.selection import KNEE_FRACTION, knee_batch_size, largest_within_budget
from tsbatch.analysis.sweep.inputs import ROTATIONS
from tsbatch.analysis.sweep.rows import SweepResult, SweepRow, curves, read_csv, write_csv
from tsbatch.analysis.sweep.swept import SweptModel
from tsbatch.sla.profiles import SlaError, load_sla


@dataclass(frozen=True)
class CurveSummary:
    model: str
    scenario: str
    precision: str
    batch_sizes: list[int]
    peak_throughput: float | None
    peak_batch: int | None
    knee: int | None
    within_budget: int | None
    budget_ms: float | None
    max_abs_diff: float | None
    cosine_min: float | None
    top1_min: float | None
    memory_at_knee_mb: float | None
    stopped: str  # "" or why the curve ended early
    fp32_max_abs_diff: float | None = None
    fp32_top1_min: float | None = None

    @property
    def still_rising(self) -> bool:
        """The knee is the largest batch measured: the peak may lie beyond the limit."""
        return bool(self.batch_sizes) and self.knee == max(self.batch_sizes) and len(self.batch_sizes) > 1


def summarize(rows: Sequence[SweepRow], budget_ms: float | None) -> CurveSummary:
    ok = [r for r in rows if r.status == "ok"]
    sizes = [r.batch_size for r in ok]
    throughputs = [float(r.throughput_sps or 0.0) for r in ok]
    knee = knee_batch_size(sizes, throughputs) if ok else None
    peak = max(ok, key=lambda r: r.throughput_sps or 0.0, default=None)
    within = (
        largest_within_budget(sizes, [float(r.latency_p95_ms or 0.0) for r in ok], budget_ms)
        if ok and budget_ms is not None
        else None
    )
    failed = [r for r in rows if r.status != "ok"]
    stopped = (
        f"{failed[0].status.upper()} at batch {failed[0].batch_size} ({failed[0].note})" if failed else ""
    )
    knee_row = next((r for r in ok if r.batch_size == knee), None)
    first = rows[0]
    return CurveSummary(
        model=first.model,
        scenario=first.scenario,
        precision=first.precision,
        batch_sizes=sizes,
        peak_throughput=peak.throughput_sps if peak else None,
        peak_batch=peak.batch_size if peak else None,
        knee=knee,
        within_budget=within,
        budget_ms=budget_ms,
        max_abs_diff=max((r.max_abs_diff for r in ok if r.max_abs_diff is not None), default=None),
        cosine_min=min((r.cosine_min for r in ok if r.cosine_min is not None), default=None),
        top1_min=min((r.top1_agreement for r in ok if r.top1_agreement is not None), default=None),
        memory_at_knee_mb=knee_row.peak_mem_mb if knee_row else None,
        stopped=stopped,
        fp32_max_abs_diff=max(
            (r.fp32_max_abs_diff for r in ok if r.fp32_max_abs_diff is not None), default=None
        ),
        fp32_top1_min=min(
            (r.fp32_top1_agreement for r in ok if r.fp32_top1_agreement is not None), default=None
        ),
    )


def fmt(value: float | None, spec: str = ".1f", missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def render_summary(
    summaries: Sequence[CurveSummary], meta: dict[str, Any], notes: Sequence[str], plots: dict[str, str]
) -> str:
    lines = [
        "# Batch-size sweep (in-process)",
        "",
        f"- device: {meta['device']}; torch {meta['torch']}; threads {meta['threads']}; "
        f"{meta['iters']} timed runs per point after {meta['warmup']} warm-up (fewer when a point passes "
        f"{meta['max_seconds']:g} s)",
        f"- knee = smallest batch reaching {KNEE_FRACTION:.0%} of peak throughput; budget = largest batch whose "
        "p95 batch latency (and every smaller batch's) stays within the latency budget",
        "- drift = each sample's output in the batch against the same sample alone at batch 1, same precision; "
        "'vs fp32' = against the sample alone at batch 1 in fp32",
        "- memory: "
        + ("CUDA max allocated" if meta["device_type"] == "cuda" else "process RSS (whole process)"),
        f"- inputs: each point times up to {ROTATIONS} different batches in turn; text batches are our utterances "
        "padded to the longest of each batch, one forward pass (the served handler may split a batch by length)",
    ]
    for model, description in meta["models"].items():
        lines.append(f"- **{model}**: {description}")
    lines += [f"- note: {note}" for note in notes]
    lines += [
        "",
        "| model | inputs | precision | peak samples/s (batch) | knee | largest batch within budget | "
        "max abs diff | min cosine | min top-1 agree | vs fp32: max abs diff / top-1 | mem at knee (MB) | stopped early |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        budget = "-" if s.budget_ms is None else f"{s.within_budget or 'none'} (p95 <= {s.budget_ms:g} ms)"
        knee = f"{s.knee} (still rising at the limit)" if s.still_rising else str(s.knee)
        vs_fp32 = (
            "-"
            if s.precision == "fp32"
            else f"{fmt(s.fp32_max_abs_diff, '.2e')} / {fmt(s.fp32_top1_min, '.3f')}"
        )
        lines.append(
            f"| {s.model} | {s.scenario} | {s.precision} | {fmt(s.peak_throughput)} ({s.peak_batch}) | "
            f"{knee} | {budget} | {fmt(s.max_abs_diff, '.2e')} | {fmt(s.cosine_min, '.6f')} | "
            f"{fmt(s.top1_min, '.3f')} | {vs_fp32} | {fmt(s.memory_at_knee_mb, '.0f')} | {s.stopped or '-'} |"
        )
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"- {key}: ![{key}]({name})" for key, name in plots.items()]
    return "\n".join(lines) + "\n"


def default_budget(sla_model: str, profile: str | None) -> float | None:
    """Half the SLA's p99: the other half is left to the batch delay and queueing."""
    try:
        return load_sla(sla_model, profile).p99_ms / 2
    except SlaError:
        return None


def write_reports(
    result: SweepResult,
    swept_models: Sequence[SweptModel],
    out_dir: Path,
    meta: dict[str, Any],
    budgets: dict[str, float | None],
) -> dict[str, Path]:
    """CSV, one plot per model and precision (made from the CSV read back) and summary.md."""
    try:
        from tsbatch.analysis.sweep.plot import plot_sweep
    except ImportError as exc:  # a bare machine without matplotlib still gets the CSV and summary
        plot_sweep = None
        result.notes.append(f"plots skipped: {exc}")
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "sweep.csv"
    write_csv(result.rows, csv_path)
    rows = read_csv(csv_path)
    plots: dict[str, str] = {}
    by_plot: dict[tuple[str, str], list[SweepRow]] = {}
    for row in rows:
        by_plot.setdefault((row.model, row.precision), []).append(row)
    for (model, precision), plot_rows in by_plot.items():
        if plot_sweep is None:
            break
        name = f"{model}_{precision}.png"
        plot_sweep(plot_rows, out_dir / name, f"{model} ({precision}, {meta['device']})", budgets.get(model))
        plots[f"{model} {precision}"] = name
    summaries = [summarize(group, budgets.get(key[0])) for key, group in curves(rows)]
    meta = {**meta, "models": {t.name: t.description for t in swept_models}}
    summary_path = out_dir / "summary.md"
    summary_path.write_text(render_summary(summaries, meta, result.notes, plots))
    (out_dir / "sweep.json").write_text(json.dumps({"meta": meta, "notes": result.notes}, indent=2) + "\n")
    return {"csv": csv_path, "summary": summary_path, **{k: out_dir / v for k, v in plots.items()}}
