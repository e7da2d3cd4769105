"""Requests whose deadline has passed, or will pass before their batch can finish, are
answered 503 at once, before decode and compute: work nobody waits for any more is not done,
and the time goes to the requests that can still be answered in time.

TorchServe 0.12 forwards every HTTP header of a request to the handler, but no arrival time
and nothing of a gRPC call's deadline (docs/api.md, "Deadlines"). The deadline is therefore
the client's, absolute: ``X-Request-Deadline-Ms``, Unix time in milliseconds. Where a model
sets a default budget (``deadlineBudgetMs`` in config.properties), a request without that
header gets its arrival plus the budget, the arrival being the stamp a proxy or ingress in
front of TorchServe sets (``X-Request-Start``, as nginx and Heroku write it); without a
stamp the budget cannot apply and the request is computed. Either way the clocks must
agree (the same host, or both synced): a skew moves every deadline by as much.

How long a batch will take is predicted per input: the worker learns the time of one
input (a weighted mean over the batches it ran) and keeps, of the requests with deadlines,
the latest-due ones whose batch, with them in it, still finishes in time for each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchkit.errors import DeadlineExceeded, InvalidDeadline, RequestError

DEADLINE_HEADER = "X-Request-Deadline-Ms"
ARRIVAL_HEADER = "X-Request-Start"
# How much one new batch moves the expected time per input and its spread: recent batches
# count most, one outlier does not decide alone.
EXPECTED_WEIGHT = 0.2
# A batch is predicted at the mean time per input plus this many mean deviations: an answer
# late by the spread of batch times counts as late as any other.
SPREAD_MARGIN = 2.0
# An arrival stamp's unit, told by its size (Unix time now is ~1.7e9 s): below each bound,
# the stamp is in that many units per millisecond (seconds, milliseconds, microseconds).
STAMP_UNITS = ((1e11, 1e-3), (1e14, 1.0), (1e17, 1e3))
NANOSECONDS_PER_MS = 1e6
# A worker that has computed nothing for this long computes the latest-due request still in
# time whatever the prediction says: only computed batches correct the prediction, so one
# slow spell could otherwise shed every later request for good.
RELEARN_AFTER_MS = 1000.0


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """A header by name in any case (TorchServe keeps the client's spelling)."""
    wanted = name.lower()
    return next((str(value) for key, value in headers.items() if key.lower() == wanted), None)


def unix_ms(text: str, name: str, what: str) -> float | RequestError:
    """A positive finite number of a header, or the 400 naming the header and what it must be."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        return InvalidDeadline.error(f"{name} must be {what}, got {text!r}")
    return value


def arrival_of(headers: Mapping[str, str]) -> float | RequestError | None:
    """When the proxy in front stamped the request, in Unix ms (``t=`` optional; seconds,
    milliseconds or microseconds told by size), None without a stamp, or its 400."""
    text = header_value(headers, ARRIVAL_HEADER)
    if text is None:
        return None
    stamp = unix_ms(
        text.strip().removeprefix("t="), ARRIVAL_HEADER, "the arrival as Unix time (t=<s, ms or us>)"
    )
    if isinstance(stamp, RequestError):
        return stamp
    per_ms = next((units for bound, units in STAMP_UNITS if stamp < bound), NANOSECONDS_PER_MS)
    return stamp / per_ms


def deadline_of(headers: Mapping[str, str], budget_ms: float = 0.0) -> float | RequestError | None:
    """The request's deadline in Unix milliseconds: its header's, else its arrival stamp plus
    ``budget_ms`` (when that is set); None when it has none, or the 400 of a bad header."""
    text = header_value(headers, DEADLINE_HEADER)
    if text is not None:
        return unix_ms(text, DEADLINE_HEADER, "the deadline as Unix time in milliseconds")
    if budget_ms <= 0:
        return None
    arrival = arrival_of(headers)
    return arrival + budget_ms if isinstance(arrival, float) else arrival


def shed_error(deadline_ms: float, now_ms: float, expected_batch_ms: float) -> RequestError | None:
    """The 503 for a request that is late already, or that the batch it is in would answer
    late (its expected time added to now); None for one that can still be answered in time."""
    late_by = now_ms - deadline_ms
    retry_after_s = max(1, math.ceil(expected_batch_ms / 1000))
    if late_by >= 0:
        return DeadlineExceeded.error(
            f"the request's deadline ({deadline_ms:.0f}, Unix ms) passed {late_by:.0f} ms before "
            "its batch ran; it was not computed. Send a later deadline, or retry",
            retry_after_s,
        )
    if now_ms + expected_batch_ms > deadline_ms:
        return DeadlineExceeded.error(
            f"the request's deadline ({deadline_ms:.0f}, Unix ms) is {-late_by:.0f} ms away and its batch "
            f"would take about {expected_batch_ms:.0f} ms here; it was not computed. Send a later deadline, or retry",
            retry_after_s,
        )
    return None


@dataclass
class DeadlinePolicy:
    """One worker's shedding: what each request's headers say (and the model's default
    budget), against the time one input takes (weighted mean and spread of the batches it ran)."""

    budget_ms: float = 0.0
    mean_input_ms: float = 0.0
    deviation_ms: float = 0.0  # mean absolute deviation of the time per input
    batches_seen: int = field(default=0)
    last_computed_ms: float = field(default=0.0)  # when the verdicts last kept a request

    @property
    def expected_input_ms(self) -> float:
        """What one more input is predicted to add to a batch: its mean time plus the margin."""
        return self.mean_input_ms + SPREAD_MARGIN * self.deviation_ms

    def verdicts(self, headers: Sequence[Mapping[str, str]], now_ms: float) -> list[RequestError | None]:
        """Per request, the error that answers it now, or None to compute it.

        Requests without a deadline are computed whatever it costs; of the others the
        latest-due are kept first, each only if the batch, one input longer, still finishes
        before its deadline (deadlines fall as the batch grows: the first that fails ends it).
        After ``RELEARN_AFTER_MS`` without computing anything, the latest-due request still in
        time is computed anyway.
        """
        deadlines = [deadline_of(each, self.budget_ms) for each in headers]
        verdicts = [deadline if isinstance(deadline, RequestError) else None for deadline in deadlines]
        computed = sum(deadline is None for deadline in deadlines)
        timed = sorted(
            ((deadline, index) for index, deadline in enumerate(deadlines) if isinstance(deadline, float)),
            reverse=True,
        )
        for deadline, index in timed:
            verdicts[index] = shed_error(deadline, now_ms, self.expected_input_ms * (computed + 1))
            computed += verdicts[index] is None
        if (
            not computed
            and timed
            and timed[0][0] > now_ms
            and now_ms - self.last_computed_ms >= RELEARN_AFTER_MS
        ):
            verdicts[timed[0][1]] = None  # nothing computed for a while: measure again
            computed = 1
        if computed:
            self.last_computed_ms = now_ms
        return verdicts

    def observe(self, batch_ms: float, inputs: int) -> None:
        """A batch of ``inputs`` computed inputs took ``batch_ms`` in the handler, start to end."""
        if inputs < 1:
            return
        per_input = batch_ms / inputs
        if self.batches_seen == 0:
            self.mean_input_ms = per_input
        else:
            error = per_input - self.mean_input_ms
            self.mean_input_ms += EXPECTED_WEIGHT * error
            self.deviation_ms += EXPECTED_WEIGHT * (abs(error) - self.deviation_ms)
        self.batches_seen += 1
