"""Keeps every request's exact response time and the boundaries of the measured window.

Plain Python (no Locust import) so the window rules are unit-tested directly. The
Locust wiring in :mod:`tsbatch.locust.plugin` calls it from events: ``test_start`` -> reset,
``spawning_complete`` -> :meth:`ramp_up_done`, ``request`` -> :meth:`record`,
``test_stop`` -> :meth:`stopped`. In a distributed run the workers :meth:`drain` their
samples into the periodic report and the master :meth:`extend` s its recorder with them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from tsbatch.sla.gate import Sample, Window
from tsbatch.sla.levels import LoadLevel


class SampleRecorder:
    """Samples of the current test plus when its ramp-up ended and when it stopped."""

    def __init__(self, warmup_s: float = 0.0, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.warmup_s = warmup_s
        self.samples: list[Sample] = []
        self.ramp_up_end: float | None = None
        self.stop_time: float | None = None
        self.levels: list[tuple[float, int, float]] = []  # (when, users, spawn rate) per shape change

    def reset(self, warmup_s: float | None = None) -> None:
        """A new test: forget samples and window. Load levels are the shape's to clear
        (:meth:`clear_levels`), because its first level is set just before ``test_start``."""
        if warmup_s is not None:
            self.warmup_s = warmup_s
        self.samples.clear()
        self.ramp_up_end = None
        self.stop_time = None

    def clear_levels(self) -> None:
        self.levels.clear()

    def reset_samples(self) -> None:
        """Locust's 'reset stats': drop samples so far; the window restarts now if it had begun."""
        self.samples.clear()
        if self.ramp_up_end is not None:
            self.ramp_up_end = self.clock()
            self.warmup_s = 0.0

    def record(self, model: str, start: float, response_time_ms: float | None, ok: bool) -> None:
        self.samples.append(Sample(model, start, response_time_ms, ok))

    def extend(self, rows: Iterable[Sequence]) -> None:
        self.samples.extend(Sample.from_row(row) for row in rows)

    def drain(self) -> list[list]:
        """Rows recorded since the last drain (a worker ships these to the master, then forgets them)."""
        rows = [sample.as_row() for sample in self.samples]
        self.samples.clear()
        return rows

    def ramp_up_done(self, when: float | None = None) -> None:
        """The first ``spawning_complete`` opens the window (later ones, e.g. shape steps, do not move it)."""
        if self.ramp_up_end is None:
            self.ramp_up_end = self.clock() if when is None else when

    def stopped(self, when: float | None = None) -> None:
        if self.stop_time is None:
            self.stop_time = self.clock() if when is None else when

    def add_level(self, users: int, spawn_rate: float, when: float | None = None) -> None:
        self.levels.append((self.clock() if when is None else when, users, spawn_rate))

    def window_opens(self) -> float | None:
        """When the measured window opens (it may lie ahead, inside the warm-up); ``None`` while ramping up."""
        return None if self.ramp_up_end is None else self.ramp_up_end + self.warmup_s

    def window(self, now: float | None = None) -> Window:
        """``[ramp-up end + warmup, stop or now)``; start is ``None`` while still ramping up."""
        end = self.stop_time if self.stop_time is not None else (self.clock() if now is None else now)
        start = self.window_opens()
        if start is not None and start > end:
            start = end  # stopped inside the warm-up: an empty window, not a negative one
        return Window(start, end)

    def load_levels(self) -> list[LoadLevel]:
        """The run cut at every user-count change; each level starts once its ramp should be done."""
        end = self.stop_time if self.stop_time is not None else self.clock()
        levels = []
        previous_users = 0
        for index, (when, users, spawn_rate) in enumerate(self.levels):
            until = self.levels[index + 1][0] if index + 1 < len(self.levels) else end
            ramp = abs(users - previous_users) / spawn_rate if spawn_rate > 0 else 0.0
            if when + ramp < until:
                levels.append(LoadLevel(users, when + ramp, until))
            previous_users = users
        return levels
