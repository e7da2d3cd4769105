"""One finding of a configuration check: how bad, where, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    severity: str  # "error", "warning" or "note" (what a key left out takes: neither fails)
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity.upper():7} {self.where}: {self.message}"
