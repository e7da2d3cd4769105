"""What the sweep's and the tuner's PNGs share: matplotlib on the Agg backend (no display
needed), the pass/fail/winner colours, and saving a figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

PASS_COLOUR = "#1a7f37"
FAIL_COLOUR = "#cf222e"
WINNER_COLOUR = "#bf8700"


def save_figure(figure: Figure, path: Path) -> Path:
    """Lay the figure out, write it as a PNG and free it (pyplot keeps every open figure)."""
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
