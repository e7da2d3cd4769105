"""Line charts as inline SVG strings, drawn on the server: no JavaScript library, no CDN, no network.

The web UI's SLA page and the headless HTML report embed the same markup, so a chart in CI
looks like the one on the screen. A ``None`` value breaks its line (an interval with no data).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 420, 210
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 44, 30
TICKS = 4
AXIS_COLOUR, GRID_COLOUR, TEXT_COLOUR = "#8c96a8", "#e3e7ee", "#1d2330"
WINDOW_COLOUR = "#e8f4ea"  # the measured window, shaded behind the lines
OFF_SCALE = 3.0  # a target more than this many times the data's top is named, not drawn


@dataclass(frozen=True)
class Series:
    """One line: ``(x seconds, y)`` points; ``dashed`` for targets and configured limits, which
    the scale fits only when near the data unless ``always_in_scale`` (a limit the data lives under)."""

    label: str
    colour: str
    points: Sequence[tuple[float, float | None]]
    dashed: bool = False
    always_in_scale: bool = False


def level(
    label: str, colour: str, value: float, x_range: tuple[float, float], always_in_scale: bool = False
) -> Series:
    """A horizontal dashed line (an SLA target, the configured batch size) across the chart."""
    return Series(label, colour, [(x_range[0], value), (x_range[1], value)], True, always_in_scale)


def _nice_ceiling(value: float) -> float:
    """The smallest 1/2/2.5/4/5/6/8 x 10^k at or above ``value``, so the ticks read as round numbers."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 2.5, 4, 5, 6, 8, 10) if step * magnitude >= value)


def _top(line: Series) -> float:
    return max((y for _, y in line.points if y is not None), default=0.0)


def _y_max(series: Sequence[Series]) -> float:
    """A round top over the data; a target line counts only when it is near the data (a target
    far above would flatten the lines it is there to judge)."""
    data = max((_top(line) for line in series if not line.dashed or line.always_in_scale), default=0.0)
    near = [_top(line) for line in series if line.dashed and (data == 0 or _top(line) <= OFF_SCALE * data)]
    return _nice_ceiling(max([data, *near, 1e-9]) * 1.05 / TICKS) * TICKS


def _label(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def line_chart(
    title: str,
    series: Sequence[Series],
    x_range: tuple[float, float],
    window: tuple[float, float] | None = None,
    y_unit: str = "",
) -> str:
    """An SVG chart of ``series`` over ``x_range`` (seconds); ``window`` is shaded as measured."""
    x_min, x_max = x_range
    x_span = max(x_max - x_min, 1e-9)
    y_max = _y_max(series)
    shown = [line for line in series if not line.dashed or line.always_in_scale or _top(line) <= y_max]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (min(max(x, x_min), x_max) - x_min) / x_span * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - y / y_max * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'font-family="system-ui, sans-serif" font-size="11" fill="{TEXT_COLOUR}">',
        f'<text x="{LEFT}" y="15" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    if window is not None and window[1] > window[0]:
        x0, x1 = px(window[0]), px(window[1])
        parts.append(
            f'<rect x="{x0:.1f}" y="{TOP}" width="{x1 - x0:.1f}" height="{plot_h}" fill="{WINDOW_COLOUR}"/>'
        )
    for tick in range(TICKS + 1):
        value = y_max * tick / TICKS
        y = py(value)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="{GRID_COLOUR}"/>'
        )
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(value)}{y_unit}</text>')
    step = _nice_ceiling(x_span / 5)  # seconds since the start, at round values
    for tick in range(int(x_span // step) + 1):
        parts.append(
            f'<text x="{px(x_min + tick * step):.1f}" y="{HEIGHT - 12}" text-anchor="middle">'
            f"{_label(tick * step)} s</text>"
        )
    parts.append(
        f'<polyline points="{LEFT},{TOP} {LEFT},{TOP + plot_h} {LEFT + plot_w},{TOP + plot_h}" '
        f'fill="none" stroke="{AXIS_COLOUR}"/>'
    )
    for line in shown:
        parts.extend(_polylines(line, px, py))
    parts.extend(_legend(shown, off_scale=len(shown) < len(series)))
    parts.append("</svg>")
    return "".join(parts)


def _polylines(line: Series, px: Callable[[float], float], py: Callable[[float], float]) -> list[str]:
    """One ``<polyline>`` per unbroken run of points (a lone point becomes a dot)."""
    dash = ' stroke-dasharray="5 4"' if line.dashed else ""
    runs: list[list[str]] = [[]]
    for x, y in line.points:
        if y is None:
            runs.append([])
        else:
            runs[-1].append(f"{px(x):.1f},{py(y):.1f}")
    out = []
    for run in filter(None, runs):
        if len(run) == 1:
            cx, cy = run[0].split(",")
            out.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{line.colour}"/>')
        else:
            out.append(
                f'<polyline class="series" data-label="{escape(line.label)}" points="{" ".join(run)}" '
                f'fill="none" stroke="{line.colour}" stroke-width="2"{dash}/>'
            )
    return out


def _legend(series: Sequence[Series], off_scale: bool) -> list[str]:
    """Solid lines by name, right-aligned; dashed ones share one "target" entry (same colours)."""
    entries = [(line.label, line.colour, False) for line in series if not line.dashed]
    if any(line.dashed for line in series):
        entries.append(("target", AXIS_COLOUR, True))
    if off_scale:
        entries.append(("targets above", AXIS_COLOUR, True))
    out = []
    x = WIDTH - RIGHT
    for label, colour, dashed in reversed(entries):
        x -= 16 + 6.2 * len(label) + 8
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP - 12}" x2="{x + 12:.1f}" y2="{TOP - 12}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{x + 16:.1f}" y="{TOP - 8}">{escape(label)}</text>'
        )
    return out
