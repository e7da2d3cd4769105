"""Load shapes as a pure schedule: elapsed seconds -> (users, spawn rate), or ``None`` to stop.

- ``steady``: ramp to ``users`` at ``spawn_rate`` and hold until ``run_time``.
- ``step``: start at ``step_users`` and add ``step_users`` every ``step_time`` seconds up to
  ``users``; hold the top until ``run_time`` (without a run time, stop after the top step).
  The per-level table printed at the end shows where throughput stops growing: the knee.
- ``spike``: hold ``users``; at ``spike_at`` jump to ``spike_users`` as fast as possible for
  ``spike_time`` seconds, then drop back. Shows whether the queue drains after a burst.

Zero for a tuning value means "derive it": step_users = users/4, spike_users = 3 x users,
spike_at = run_time/3, spike_time = run_time/6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SHAPES = ("steady", "step", "spike")


@dataclass(frozen=True)
class ShapeParams:
    kind: str
    users: int
    spawn_rate: float
    run_time: float | None = None
    step_users: int = 0
    step_time: float = 10.0
    spike_users: int = 0
    spike_at: float = 0.0
    spike_time: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in SHAPES:
            raise ValueError(f"unknown shape {self.kind!r} (choose from {', '.join(SHAPES)})")
        if self.users < 1 or self.spawn_rate <= 0:
            raise ValueError("a shape needs users >= 1 and a spawn rate > 0")

    @property
    def effective_step_users(self) -> int:
        return self.step_users or max(1, math.ceil(self.users / 4))

    @property
    def effective_spike_users(self) -> int:
        return self.spike_users or 3 * self.users

    @property
    def effective_spike_at(self) -> float:
        return self.spike_at or (self.run_time / 3 if self.run_time else 10.0)

    @property
    def effective_spike_time(self) -> float:
        return self.spike_time or max(1.0, self.run_time / 6 if self.run_time else 5.0)


def target(params: ShapeParams, elapsed: float) -> tuple[int, float] | None:
    """Users and spawn rate the run should have ``elapsed`` seconds in; ``None`` = stop now."""
    if params.run_time is not None and elapsed >= params.run_time:
        return None
    if params.kind == "steady":
        return params.users, params.spawn_rate
    if params.kind == "step":
        step = params.effective_step_users
        steps = math.ceil(params.users / step)
        index = int(elapsed // params.step_time)
        if index >= steps and params.run_time is None:
            return None
        return min((index + 1) * step, params.users), params.spawn_rate
    # spike
    start = params.effective_spike_at
    fast = float(max(params.spawn_rate, params.effective_spike_users))  # whole spike within ~1 s
    if elapsed < start:
        return params.users, params.spawn_rate
    if elapsed < start + params.effective_spike_time:
        return params.effective_spike_users, fast
    return params.users, fast
