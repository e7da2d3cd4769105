"""The sweep's PNG: throughput and latency against batch size, one line per input scenario."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from tsbatch.analysis.plots import FAIL_COLOUR, save_figure
from tsbatch.analysis.selection import KNEE_FRACTION, knee_batch_size, largest_within_budget
from tsbatch.analysis.sweep.rows import SweepRow

SCENARIO_COLOURS = ("#0969da", "#8250df", "#1a7f37", "#bc4c00")


def mark(axis: Axes, x: float, y: float, colour: str, text: str, **annotation: Any) -> None:
    """A hollow diamond and a label at a chosen point: a knee, or the largest batch within budget."""
    axis.plot([x], [y], "D", color=colour, markersize=11, markerfacecolor="none", markeredgewidth=2)
    axis.annotate(text, (x, y), textcoords="offset points", color=colour, **annotation)


def plot_sweep(rows: Sequence[SweepRow], path: Path, title: str, budget_ms: float | None = None) -> Path:
    """Throughput and latency against batch size, one line per input scenario.

    The knee of each curve is marked on the throughput panel; the latency budget (and the
    largest batch within it) on the latency panel; an out-of-memory stop as a red dotted line.
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
            mark(left, knee, throughput[sizes.index(knee)], colour, f"knee b={knee}", xytext=(8, -14))
        p50 = [float(r.latency_p50_ms or 0.0) for r in ok]
        p95 = [float(r.latency_p95_ms or 0.0) for r in ok]
        right.plot(sizes, p50, "o-", color=colour, label=f"{scenario} p50")
        right.plot(sizes, p95, "s--", color=colour, alpha=0.7, label=f"{scenario} p95")
        if budget_ms is not None and ok:
            within = largest_within_budget(sizes, p95, budget_ms)
            if within is not None:
                mark(
                    right,
                    within,
                    p95[sizes.index(within)],
                    colour,
                    f"within budget: b={within}",
                    xytext=(-130, 24 + 18 * index),
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
    return save_figure(figure, path)
