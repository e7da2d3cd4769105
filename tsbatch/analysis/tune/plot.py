"""The tuner's PNG: every configuration tried, throughput against p99, with the SLA lines."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tsbatch.analysis.plots import FAIL_COLOUR, PASS_COLOUR, WINNER_COLOUR, save_figure
from tsbatch.analysis.selection import Selection


def plot_tune(selection: Selection, path: Path, title: str) -> Path:
    """Every configuration tried: throughput against p99, the SLA's p99 ceiling and
    throughput floor as lines, passing points green, failing red, the winner starred."""
    sla = selection.sla
    measured = [v for v in selection.verdicts if not v.point.failure and v.point.requests > 0]
    figure, axis = plt.subplots(figsize=(9, 6))
    placed: list[tuple[float, float]] = []
    p99_span = max((v.point.p99_ms for v in measured), default=1.0) or 1.0
    rps_span = max((v.point.throughput_rps for v in measured), default=1.0) or 1.0
    for verdict in sorted(measured, key=lambda v: (v.point.p99_ms, v.point.throughput_rps)):
        point = verdict.point
        colour = PASS_COLOUR if verdict.meets_sla else FAIL_COLOUR
        marker = "o" if point.settings.batch_size > 1 else "s"
        axis.scatter([point.p99_ms], [point.throughput_rps], color=colour, marker=marker, s=45, zorder=3)
        # a label whose point sits close to an already labelled one goes below it instead
        crowded = any(
            abs(point.p99_ms - x) < 0.06 * p99_span and abs(point.throughput_rps - y) < 0.04 * rps_span
            for x, y in placed
        )
        placed.append((point.p99_ms, point.throughput_rps))
        axis.annotate(
            point.short_label,
            (point.p99_ms, point.throughput_rps),
            textcoords="offset points",
            xytext=(5, -11) if crowded else (5, 4),
            fontsize=7,
        )
    if selection.winner is not None:
        winner = selection.winner
        axis.scatter(
            [winner.p99_ms], [winner.throughput_rps], marker="*", s=420, color=WINNER_COLOUR, edgecolor="black", zorder=4,
            label=f"winner: {winner.short_label} ({winner.throughput_rps:.1f} rps, p99 {winner.p99_ms:.0f} ms)",
        )  # fmt: skip
    else:
        axis.text(
            0.5, 0.5, "NO configuration meets the SLA", transform=axis.transAxes, ha="center", va="center",
            fontsize=16, color=FAIL_COLOUR, alpha=0.8,
        )  # fmt: skip
    axis.axvline(sla.p99_ms, color=FAIL_COLOUR, linestyle="--", label=f"SLA p99 <= {sla.p99_ms:g} ms")
    axis.axhline(
        sla.min_throughput_rps,
        color="grey",
        linestyle=":",
        label=f"SLA throughput >= {sla.min_throughput_rps:g} rps",
    )
    p99s = [v.point.p99_ms for v in measured] + [sla.p99_ms]
    if min(p99s) > 0 and max(p99s) / min(p99s) > 30:
        axis.set_xscale("log")
    else:
        axis.set_xlim(left=0)
    right = axis.get_xlim()[1]
    axis.axvspan(sla.p99_ms, max(right, sla.p99_ms * 1.05), color=FAIL_COLOUR, alpha=0.06)
    axis.set_xlim(right=max(right, sla.p99_ms * 1.05))
    axis.scatter([], [], color=PASS_COLOUR, label="meets the SLA")
    axis.scatter([], [], color=FAIL_COLOUR, label="misses the SLA")
    axis.scatter([], [], color="black", marker="s", label="batch size 1")
    unmeasured = len(selection.verdicts) - len(measured)
    axis.set_xlabel("p99 latency (ms)")
    axis.set_ylabel("throughput (requests/s)")
    axis.set_ylim(bottom=0)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    suffix = f" ({unmeasured} not measured)" if unmeasured else ""
    axis.set_title(f"{title}{suffix}")
    return save_figure(figure, path)
