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

How long a batch will take is predicted from the batches the worker ran, as a fixed cost
plus a cost per input (``batch_time``), every input of a multi-input request counted; of
the requests with deadlines the latest-due are kept while the batch, with them in it, could
still finish in time for each. Which way a verdict errs depends on what waits behind the
batch: under light traffic (bursts included) nothing does, and a wrong shed costs a request
that would have made it, so the batch is counted a usual jitter faster than expected; when
the worker has been computing nearly all the time of late, requests are queued behind it,
every one of them delayed by a request computed late, so the batch is counted three usual
jitters slower. A deadline must be Unix milliseconds: one in seconds, micro- or
nanoseconds is refused (400) saying so, as is a header sent twice.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchkit.batch_time import BatchTimes
from batchkit.errors import DeadlineExceeded, InvalidDeadline, RequestError

DEADLINE_HEADER = "X-Request-Deadline-Ms"
ARRIVAL_HEADER = "X-Request-Start"
# Under light traffic a request is shed only if its batch would end after its deadline even
# this many mean deviations of batch times faster than expected: on the knife's edge, where
# the usual jitter decides, it is computed (a late answer costs one batch; a wrong shed
# costs the request).
JITTER_ALLOWANCE = 1.0
# A worker that spent at least this share of the last BUSY_WINDOW_MS computing is saturated:
# requests queue behind each batch. A request is then kept only if its batch ends in time
# even this many mean deviations slower than expected, since one computed late delays every
# request behind it (at 1x-2x capacity, 2.5% of the requests kept by the light-traffic rule
# ended late, and the served p99 passed its target; at 2 deviations the 2x row's p99 was still
# 308 ms against 300, at 3 it was 291). A burst after a trickle stays light.
BUSY_WINDOW_MS = 1000.0
BUSY_SHARE = 0.8
BUSY_ALLOWANCE = 3.0
# Unix time in milliseconds lies between these (1973 and 5138): a deadline outside them is
# in another unit, and the bound it crosses says which.
MS_RANGE = (1e11, 1e14)
DEADLINE_UNITS = ((1e11, "seconds (or a duration, not a Unix time)"), (1e14, ""), (1e17, "microseconds"))
DEADLINE_EXAMPLE = "1767225600000"  # 2026-01-01T00:00:00Z
# A worker idle for longer than its batch delay plus this had an empty queue: every request
# of its next batch arrived after its last batch ended.
IDLE_SLACK_MS = 100.0
# An arrival stamp's unit, told by its size (Unix time now is ~1.7e9 s): below each bound,
# the stamp is in that many units per millisecond (seconds, milliseconds, microseconds).
STAMP_UNITS = ((1e11, 1e-3), (1e14, 1.0), (1e17, 1e3))
NANOSECONDS_PER_MS = 1e6
# A worker that has computed nothing for this long computes the latest-due request still in
# time whatever the prediction says: only computed batches correct the prediction, so one
# slow spell could otherwise shed every later request for good.
RELEARN_AFTER_MS = 1000.0


def header_values(headers: Mapping[str, str], name: str) -> list[str]:
    """Every value of a header, in any case (TorchServe keeps the client's spelling, so two
    spellings arrive as two keys), comma-joined values apart."""
    wanted = name.lower()
    return [
        part.strip()
        for key, value in headers.items()
        if key.lower() == wanted
        for part in str(value).split(",")
    ]


def header_value(headers: Mapping[str, str], name: str) -> str | RequestError | None:
    """A header's one value, None without it, or the 400 of a header sent more than once."""
    values = header_values(headers, name)
    if len(values) > 1:
        return InvalidDeadline.error(
            f"{name} was sent {len(values)} times ({', '.join(values)}): send it once, with one value"
        )
    return values[0] if values else None


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
    if text is None or isinstance(text, RequestError):
        return text
    stamp = unix_ms(
        text.strip().removeprefix("t="), ARRIVAL_HEADER, "the arrival as Unix time (t=<s, ms or us>)"
    )
    if isinstance(stamp, RequestError):
        return stamp
    per_ms = next((units for bound, units in STAMP_UNITS if stamp < bound), NANOSECONDS_PER_MS)
    return stamp / per_ms


def deadline_ms(text: str) -> float | RequestError:
    """The header's value as Unix milliseconds, or the 400 saying which unit it looks like."""
    value = unix_ms(text, DEADLINE_HEADER, "the deadline as Unix time in milliseconds")
    if isinstance(value, RequestError) or MS_RANGE[0] <= value < MS_RANGE[1]:
        return value
    looks = next((unit for bound, unit in DEADLINE_UNITS if value < bound), "nanoseconds, or no time at all")
    return InvalidDeadline.error(
        f"{DEADLINE_HEADER} must be the deadline as Unix time in milliseconds (13 digits, e.g. "
        f"{DEADLINE_EXAMPLE}); {text!r} looks like {looks}"
    )


def deadline_of(headers: Mapping[str, str], budget_ms: float = 0.0) -> float | RequestError | None:
    """The request's deadline in Unix milliseconds: its header's, else its arrival stamp plus
    ``budget_ms`` (when that is set); None when it has none, or the 400 of a bad header."""
    text = header_value(headers, DEADLINE_HEADER)
    if text is not None:
        return text if isinstance(text, RequestError) else deadline_ms(text)
    if budget_ms <= 0:
        return None
    arrival = arrival_of(headers)
    return arrival + budget_ms if isinstance(arrival, float) else arrival


def shed_error(
    deadline_ms: float, now_ms: float, expected_batch_ms: float, arrived_after_ms: float | None = None
) -> RequestError | None:
    """The 503 for a request that is late already, or that the batch it is in would answer
    late (its expected time added to now); None for one that can still be answered in time.
    A deadline that had passed before the request arrived (``arrived_after_ms``, when known)
    gets no Retry-After: the same request again would be shed again."""
    late_by = now_ms - deadline_ms
    retry_after_s = max(1, math.ceil(expected_batch_ms / 1000))
    if arrived_after_ms is not None and deadline_ms < arrived_after_ms:
        return DeadlineExceeded.error(
            f"the request's deadline ({deadline_ms:.0f}, Unix ms) had passed before it reached the server "
            f"({late_by:.0f} ms ago); it was not computed. Send a deadline in the future, by a clock in step "
            "with the server's"
        )
    if late_by >= 0:
        return DeadlineExceeded.error(
            f"the request's deadline ({deadline_ms:.0f}, Unix ms) passed {late_by:.0f} ms before "
            "its batch ran; it was not computed. Send a later deadline, or retry",
            retry_after_s,
        )
    if now_ms + expected_batch_ms > deadline_ms:
        return DeadlineExceeded.error(
            f"the request's deadline ({deadline_ms:.0f}, Unix ms) is {-late_by:.0f} ms away and its batch "
            f"would take {expected_batch_ms:.0f} ms or more here; it was not computed. Send a later deadline, or retry",
            retry_after_s,
        )
    return None


@dataclass
class DeadlinePolicy:
    """One worker's shedding: what each request's headers say (and the model's default
    budget), against the time a batch takes (``BatchTimes``: fixed cost plus per input)."""

    budget_ms: float = 0.0
    batch_delay_ms: float = 100.0  # the model's maxBatchDelay (TorchServe's default)
    times: BatchTimes = field(default_factory=BatchTimes)
    last_computed_ms: float = field(default=0.0)  # when the verdicts last kept a request
    idle_since_ms: float | None = field(default=None)  # when the worker's last batch (or load) ended
    # (start, end) of the batches of the last BUSY_WINDOW_MS, Unix ms
    recent: deque[tuple[float, float]] = field(default_factory=deque)

    @property
    def batches_seen(self) -> int:
        return self.times.batches

    def expected_ms(self, inputs: int) -> float:
        """A batch of ``inputs`` inputs: its expected time (0 before any batch)."""
        return self.times.predict_ms(inputs) if self.times.batches else 0.0

    def busy(self, now_ms: float) -> bool:
        """Whether the worker computed for at least ``BUSY_SHARE`` of the last
        ``BUSY_WINDOW_MS`` (its batches' handler calls, start to end)."""
        since = now_ms - BUSY_WINDOW_MS
        computing = sum(max(0.0, min(end, now_ms) - max(start, since)) for start, end in self.recent)
        return computing >= BUSY_SHARE * BUSY_WINDOW_MS

    def verdict_ms(self, inputs: int, busy: bool) -> float:
        """What the verdicts compare with a deadline for a batch of ``inputs`` inputs: its
        expected time less the usual jitter under light traffic (erring toward computing), or
        plus three times that when the worker is saturated (erring toward being on time)."""
        allowance = BUSY_ALLOWANCE if busy else -JITTER_ALLOWANCE
        return max(0.0, self.expected_ms(inputs) + allowance * self.times.spread_ms())

    def arrived_after(self, headers: Mapping[str, str], now_ms: float) -> float | None:
        """A time the request surely arrived after: its proxy's stamp, else the end of the
        worker's last batch when the worker has been idle since (its queue was empty)."""
        stamp = arrival_of(headers)
        if isinstance(stamp, float):
            return stamp
        idle = self.idle_since_ms
        if idle is not None and now_ms - idle > self.batch_delay_ms + IDLE_SLACK_MS:
            return idle
        return None

    def verdicts(
        self, headers: Sequence[Mapping[str, str]], now_ms: float, inputs: Sequence[int] | None = None
    ) -> list[RequestError | None]:
        """Per request, the error that answers it now, or None to compute it.

        ``inputs`` holds each request's number of inputs (1 each when not given): a request
        of 32 images makes the batch 32 inputs longer. Requests without a deadline are
        computed whatever it costs; of the others the latest-due are kept first, each only if
        the batch, its inputs added, could still finish before its deadline (deadlines fall as
        the batch grows: the first that fails ends it). After ``RELEARN_AFTER_MS`` without
        computing anything, the latest-due request still in time is computed anyway.
        """
        counts = list(inputs) if inputs is not None else [1] * len(headers)
        deadlines = [deadline_of(each, self.budget_ms) for each in headers]
        verdicts = [deadline if isinstance(deadline, RequestError) else None for deadline in deadlines]
        computed = sum(deadline is None for deadline in deadlines)
        batch_inputs = sum(
            count for count, deadline in zip(counts, deadlines, strict=True) if deadline is None
        )
        busy = self.busy(now_ms)
        timed = sorted(
            ((deadline, index) for index, deadline in enumerate(deadlines) if isinstance(deadline, float)),
            reverse=True,
        )
        for deadline, index in timed:
            grown = batch_inputs + counts[index]
            verdicts[index] = shed_error(
                deadline, now_ms, self.verdict_ms(grown, busy), self.arrived_after(headers[index], now_ms)
            )
            if verdicts[index] is None:
                computed += 1
                batch_inputs = grown
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

    def observe(self, batch_ms: float, inputs: int, ended_ms: float | None = None) -> None:
        """A batch of ``inputs`` computed inputs took ``batch_ms`` in the handler, start to
        end (``ended_ms``: when, in Unix ms)."""
        self.times.observe(inputs, batch_ms)
        if ended_ms is not None:
            self.idle_since_ms = ended_ms
            self.recent.append((ended_ms - batch_ms, ended_ms))
            while self.recent and self.recent[0][1] < ended_ms - BUSY_WINDOW_MS:
                self.recent.popleft()
