"""PNG plots for the sweep and the tuner (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tsbatch.analysis.selection import KNEE_FRACTION, Selection, knee_batch_size, largest_within_budget

if TYPE_CHECKING:
    from tsbatch.analysis.sweep import SweepRow

PASS_COLOUR = "#1a7f37"
FAIL_COLOUR = "#cf222e"
WINNER_COLOUR = "#bf8700"
SCENARIO_COLOURS = ("#0969da", "#8250df", "#1a7f37", "#bc4c00")


def plot_sweep(rows: Sequence[SweepRow], path: Path, title: str, budget_ms: float | None = None) -> Path:
    """Throughput and latency against batch size, one line per input scenario.

    The knee of each curve is marked on the throughput panel; the latency budget (and the
    largest batch within it) on the latency panel; an out-of-memory stop as a red cross.
    """
    scenarios: dict[str, list[SweepRow]] = {}
    for row in rows:
        scenarios.setdefault(row.scenario, []).append(row)
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    all_sizes: set[int] = set()
    for index, (scenario, group) in enumerate(scenarios.items()):
        colour = SCENARIO_COLOURS[index % len(SCENARIO_COLOURS)]
        ok = sorted((r for r in group if r.status == "ok"), key=lambda r: r.batch_size)
        sizes = [r.batch_size for r in ok]
        all_sizes.update(r.batch_size for r in group)
        throughput = [float(r.throughput_sps or 0.0) for r in ok]
        left.plot(sizes, throughput, "o-", color=colour, label=scenario)
        knee = knee_batch_size(sizes, throughput) if ok else None
        if knee is not None:
            knee_value = throughput[sizes.index(knee)]
            left.plot(
                [knee],
                [knee_value],
                "D",
                color=colour,
                markersize=11,
                markerfacecolor="none",
                markeredgewidth=2,
            )
            left.annotate(
                f"knee b={knee}",
                (knee, knee_value),
                textcoords="offset points",
                xytext=(8, -14),
                color=colour,
            )
        p50 = [float(r.latency_p50_ms or 0.0) for r in ok]
        p95 = [float(r.latency_p95_ms or 0.0) for r in ok]
        right.plot(sizes, p50, "o-", color=colour, label=f"{scenario} p50")
        right.plot(sizes, p95, "s--", color=colour, alpha=0.7, label=f"{scenario} p95")
        if budget_ms is not None and ok:
            within = largest_within_budget(sizes, p95, budget_ms)
            if within is not None:
                value = p95[sizes.index(within)]
                right.plot(
                    [within],
                    [value],
                    "D",
                    color=colour,
                    markersize=11,
                    markerfacecolor="none",
                    markeredgewidth=2,
                )
                right.annotate(
                    f"within budget: b={within}",
                    (within, value),
                    textcoords="offset points",
                    xytext=(-130, 24 + 18 * index),
                    color=colour,
                    fontsize=9,
                    bbox={
                        "boxstyle": "round,pad=0.2",
                        "facecolor": "white",
                        "edgecolor": colour,
                        "alpha": 0.9,
                    },
                    arrowprops={"arrowstyle": "-", "color": colour, "linewidth": 0.8},
                )
        for failed in (r for r in group if r.status != "ok"):
            for axis in (left, right):
                axis.axvline(failed.batch_size, color=FAIL_COLOUR, linestyle=":", linewidth=1)
            left.annotate(
                f"{failed.status.upper()} at b={failed.batch_size}",
                (failed.batch_size, 0),
                xycoords=("data", "axes fraction"),
                xytext=(4, 8),
                textcoords="offset points",
                color=FAIL_COLOUR,
                rotation=90,
            )
    latency_top = max((float(r.latency_p95_ms or 0.0) for r in rows if r.status == "ok"), default=0.0)
    right_title = "latency per batch"
    if budget_ms is not None and budget_ms <= 3 * latency_top:
        right.axhline(
            budget_ms, color=FAIL_COLOUR, linestyle="-.", linewidth=1.2, label=f"budget {budget_ms:g} ms"
        )
    elif budget_ms is not None:  # far above every point: keep the curves readable, say it in the title
        right_title += f" (budget {budget_ms:g} ms is off the scale: every batch is within it)"
    ticks = sorted(all_sizes)
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(ticks, [str(t) for t in ticks])
        axis.set_xlabel("batch size")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    left.set_ylabel("throughput (samples/s)")
    left.set_ylim(bottom=0)
    left.set_title(f"throughput (knee: {KNEE_FRACTION:.0%} of peak)")
    right.set_ylabel("latency per batch (ms)")
    right.set_ylim(bottom=0)
    right.set_title(right_title, fontsize=10)
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


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
        marker = "o" if point.batch_size > 1 else "s"
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
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
