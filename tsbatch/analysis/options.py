"""Command-line value types shared by the sweep and the tuner."""

from __future__ import annotations

import argparse


def int_list(text: str) -> list[int]:
    """``"1,3,8"`` (spaces and a trailing comma allowed) as sorted distinct whole numbers."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one number, got {text!r}")
    return values
