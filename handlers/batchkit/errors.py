"""Request errors: immutable values carrying their HTTP status, and the exceptions decoders
raise, each mapped to its status here and turned into a value once (``error_for_exception``).

An error is a value so that it can travel from decode to the response untouched: many
inputs may hold the same one, and nothing downstream can change what it says. The shape of
its JSON body is the response's business (``protocols.error_body``), not the error's.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import ClassVar


@dataclass(frozen=True)
class RequestError:
    """What went wrong with one request (or one input of it); its batch-mates are unaffected."""

    status: int
    code: str
    message: str
    retry_after_s: int | None = None  # sent as Retry-After: when a retry may be answered

    @property
    def phrase(self) -> str:
        return HTTPStatus(self.status).phrase


class RequestRejected(Exception):
    """Raised by a decoder to reject its request or input; the class says status and code."""

    status: ClassVar[HTTPStatus] = HTTPStatus.BAD_REQUEST
    code: ClassVar[str] = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @classmethod
    def error(cls, message: str, retry_after_s: int | None = None) -> RequestError:
        """The error this rejection stands for, made without raising."""
        return RequestError(int(cls.status), cls.code, message, retry_after_s)


class InvalidInput(RequestRejected):
    """The body is well-formed HTTP but not something this model can read."""

    code = "invalid_input"


class InvalidDeadline(InvalidInput):
    """The deadline header is not a time the batch core can compare with its clock."""

    code = "invalid_deadline"


class DeadlineExceeded(RequestRejected):
    """The request's deadline has passed, or would pass before its batch finished: answered
    before decode and compute, so its batch-mates get the time."""

    status = HTTPStatus.SERVICE_UNAVAILABLE
    code = "deadline_exceeded"


class PayloadTooLarge(RequestRejected):
    """Too big to process safely (bytes or decoded pixels); rejected before full decoding."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    code = "payload_too_large"


class InferenceFailed(RequestRejected):
    """The model failed on a batch (out of memory, unexpected error); the server keeps going."""

    status = HTTPStatus.INTERNAL_SERVER_ERROR
    code = "inference_failed"


class ResourceExhausted(InferenceFailed):
    """The accelerator or host ran out of memory for this batch; a retry may succeed."""

    status = HTTPStatus.SERVICE_UNAVAILABLE
    code = "resource_exhausted"


ALL_INPUTS_REJECTED = "all_inputs_rejected"


def inputs_rejected(first: RequestError, count: int) -> RequestError:
    """The error of a request every input of which failed: it takes the status of its
    first input's error, and its body still says what happened to each input."""
    return RequestError(
        first.status,
        ALL_INPUTS_REJECTED,
        f"all {count} inputs of the request were rejected (the first: {first.message}); "
        "each input's error is in the body",
    )


def error_for_exception(exc: BaseException) -> RequestError:
    """Any exception raised while serving to the error that answers it: the one place an
    exception becomes a value."""
    if isinstance(exc, RequestRejected):
        return type(exc).error(exc.message)
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return ResourceExhausted.error(f"out of memory while running the batch: {exc}")
    return InferenceFailed.error(f"{type(exc).__name__}: {exc}")
