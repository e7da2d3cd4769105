"""Command-line value types shared by the sweep and the tuner."""

from __future__ import annotations

import argparse

from image_serving.pool import AUTO


def decode_threads_list(text: str) -> list[int | str]:
    """``"auto,1,2"``: decode pools to try, ``auto`` (sized per batch, ``image_serving.pool``)
    first, then distinct whole numbers of at least 1 in order."""
    parts = {part.strip() for part in text.split(",") if part.strip()}
    auto: list[int | str] = [AUTO] if AUTO in parts else []
    try:
        numbers = sorted({int(part) for part in parts - {AUTO}})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected auto or whole numbers, comma-separated, got {text!r}"
        ) from None
    if (not auto and not numbers) or any(number < 1 for number in numbers):
        raise argparse.ArgumentTypeError(f"expected auto or whole numbers of at least 1, got {text!r}")
    return auto + list(numbers)


def decode_threads_value(text: str) -> int | str | None:
    """A decode pool as a report's CSV spells it: a number, ``auto``, or empty (None)."""
    return int(text) if text.isdigit() else (text or None)


def int_list(text: str) -> list[int]:
    """``"1,3,8"`` (spaces and a trailing comma allowed) as sorted distinct whole numbers."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one number, got {text!r}")
    return values
