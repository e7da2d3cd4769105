"""How long a batch of n inputs takes on this worker: a fixed cost plus a cost per input.

A batch pays once for what does not grow with it (the call into the handler, parsing,
the model's launch) and per input for the rest. Dividing a batch's time by its inputs, as
a per-input mean does, charges the fixed cost to every input: after light traffic (batches
of one) a burst of eight is predicted at eight whole one-input batches. So the worker keeps,
per batch size it ran, a weighted mean of the time, and fits the line ``a * n + b`` through
them (least squares, each size weighted by how often it ran, up to a cap). Until two sizes
have been seen the line cannot be told from a flat one, and the prediction errs toward
computing: no batch is predicted slower than the size it has seen (the fixed cost is
assumed to be all of it); the first bigger batch then measures the slope.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# How much one new batch moves the mean time of its size: recent batches count most.
SIZE_WEIGHT = 0.3
# A size's weight in the fit grows with the batches of that size seen, up to this many:
# a size that ran a thousand times does not silence one that ran ten.
WEIGHT_CAP = 16
# Each batch run since a size was last seen shrinks its weight by this factor: a size the
# worker stopped running (a burst size it now sheds) fades rather than fixing the line.
RECENCY = 0.95
# Sizes not run within this many batches are forgotten: a machine that got slower or
# faster is measured again rather than fitted to what it was.
FORGET_AFTER = 500


@dataclass
class SizeTime:
    """The recent time of one batch size: a weighted mean, its mean deviation, how often."""

    mean_ms: float
    deviation_ms: float = 0.0
    count: int = 1
    last_seen: int = 0  # the batch number it was last seen at


@dataclass(frozen=True)
class Line:
    """``per_input_ms * n + fixed_ms``, never below zero in either part."""

    per_input_ms: float
    fixed_ms: float

    def at(self, inputs: int) -> float:
        return self.per_input_ms * inputs + self.fixed_ms


@dataclass
class BatchTimes:
    """The batches a worker ran, by size, and the line through them."""

    sizes: dict[int, SizeTime] = field(default_factory=dict)
    batches: int = 0

    def observe(self, inputs: int, batch_ms: float) -> None:
        """A batch of ``inputs`` computed inputs took ``batch_ms``; nothing computed teaches nothing."""
        if inputs < 1 or batch_ms < 0:
            return
        self.batches += 1
        known = self.sizes.get(inputs)
        if known is None:
            self.sizes[inputs] = SizeTime(batch_ms, last_seen=self.batches)
        else:
            error = batch_ms - known.mean_ms
            known.mean_ms += SIZE_WEIGHT * error
            known.deviation_ms += SIZE_WEIGHT * (abs(error) - known.deviation_ms)
            known.count += 1
            known.last_seen = self.batches
        for size in [
            size for size, seen in self.sizes.items() if self.batches - seen.last_seen > FORGET_AFTER
        ]:
            del self.sizes[size]

    def weight(self, seen: SizeTime) -> float:
        """A size's weight in the fit: how often it ran (capped), faded by how long ago."""
        return min(seen.count, WEIGHT_CAP) * RECENCY ** (self.batches - seen.last_seen)

    def line(self) -> Line | None:
        """The weighted least-squares line through each size's mean time; None before any batch."""
        if not self.sizes:
            return None
        points = [(size, seen.mean_ms, self.weight(seen)) for size, seen in self.sizes.items()]
        total = sum(weight for _, _, weight in points)
        mean_n = sum(size * weight for size, _, weight in points) / total
        mean_t = sum(ms * weight for _, ms, weight in points) / total
        spread_n = sum(weight * (size - mean_n) ** 2 for size, _, weight in points)
        if spread_n == 0:  # one size: all of it may be fixed cost (errs toward computing)
            return Line(0.0, mean_t)
        slope = sum(weight * (size - mean_n) * (ms - mean_t) for size, ms, weight in points) / spread_n
        if slope <= 0:  # noise over sizes that cost the same: flat
            return Line(0.0, mean_t)
        intercept = mean_t - slope * mean_n
        if intercept < 0:  # through the origin instead: no negative fixed cost
            slope = sum(weight * size * ms for size, ms, weight in points) / sum(
                weight * size * size for size, _, weight in points
            )
            intercept = 0.0
        return Line(slope, intercept)

    def predict_ms(self, inputs: int) -> float:
        """The expected time of a batch of ``inputs`` inputs: the line (0 before any batch ran)."""
        line = self.line()
        return 0.0 if line is None else line.at(inputs)

    def spread_ms(self) -> float:
        """The mean deviation of batch times around their size's mean, weighted like the fit."""
        if not self.sizes:
            return 0.0
        weights = {size: self.weight(seen) for size, seen in self.sizes.items()}
        return sum(seen.deviation_ms * weights[size] for size, seen in self.sizes.items()) / sum(
            weights.values()
        )
