"""Requests whose deadline has passed, or will pass before their batch can finish, are
answered 503 at once, before decode and compute: work nobody waits for any more is not done,
and the time goes to the requests that can still be answered in time.

TorchServe 0.12 forwards every HTTP header of a request to the handler, but no arrival time
and nothing of a gRPC call's deadline (docs/api.md, "Deadlines"). The deadline is therefore
the client's, absolute: ``X-Request-Deadline-Ms``, Unix time in milliseconds. The client's
clock and the server's must agree (the same host, or both synced): a skew moves every
deadline by as much.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from batchkit.errors import DeadlineExceeded, InvalidDeadline, RequestError

DEADLINE_HEADER = "X-Request-Deadline-Ms"
# How much one new batch moves the expected batch time: recent batches count most, one
# outlier does not decide alone.
EXPECTED_WEIGHT = 0.2


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """A header by name in any case (TorchServe keeps the client's spelling)."""
    wanted = name.lower()
    return next((str(value) for key, value in headers.items() if key.lower() == wanted), None)


def deadline_of(headers: Mapping[str, str]) -> float | RequestError | None:
    """The request's deadline in Unix milliseconds, None when it has none, or the 400 error
    that a header which is not a number gets."""
    text = header_value(headers, DEADLINE_HEADER)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        return InvalidDeadline.error(
            f"{DEADLINE_HEADER} must be the deadline as Unix time in milliseconds, got {text!r}"
        )
    return value


def shed_error(deadline_ms: float, now_ms: float, expected_batch_ms: float) -> RequestError | None:
    """The 503 for a request that is late already, or that the batch it is in would answer
    late (its expected time added to now); None for one that can still be answered in time."""
    late_by = now_ms - deadline_ms
    retry_after_s = max(1, math.ceil(expected_batch_ms / 1000))
    if late_by >= 0:
        return DeadlineExceeded.error(
            f"the request's deadline ({DEADLINE_HEADER} {deadline_ms:.0f}) passed {late_by:.0f} ms before "
            "its batch ran; it was not computed. Send a later deadline, or retry",
            retry_after_s,
        )
    if now_ms + expected_batch_ms > deadline_ms:
        return DeadlineExceeded.error(
            f"the request's deadline ({DEADLINE_HEADER} {deadline_ms:.0f}) is {-late_by:.0f} ms away and a batch "
            f"takes about {expected_batch_ms:.0f} ms here; it was not computed. Send a later deadline, or retry",
            retry_after_s,
        )
    return None


@dataclass
class DeadlinePolicy:
    """One worker's shedding: what each request's headers say, against the time its batches
    take (an exponentially weighted mean of the batches it has run)."""

    expected_batch_ms: float = 0.0
    batches_seen: int = field(default=0)

    def verdict(self, headers: Mapping[str, str], now_ms: float) -> RequestError | None:
        """The error that answers this request now, or None to compute it."""
        deadline = deadline_of(headers)
        if deadline is None or isinstance(deadline, RequestError):
            return deadline
        return shed_error(deadline, now_ms, self.expected_batch_ms)

    def observe(self, batch_ms: float) -> None:
        """A batch ran in ``batch_ms`` (decode, model and encode)."""
        if self.batches_seen == 0:
            self.expected_batch_ms = batch_ms
        else:
            self.expected_batch_ms += EXPECTED_WEIGHT * (batch_ms - self.expected_batch_ms)
        self.batches_seen += 1
