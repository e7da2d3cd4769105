"""Request errors that carry their HTTP status, mapped to a response in one place."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any


class RequestError(Exception):
    """An error that belongs to one request of a batch; its batch-mates are unaffected."""

    status: int = HTTPStatus.BAD_REQUEST
    error_type: str = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        # The request spoke the Open Inference Protocol, whose clients read "error" as
        # the message string (tritonclient fails on anything else).
        self.oip = False

    @property
    def phrase(self) -> str:
        return HTTPStatus(self.status).phrase

    def to_body(self) -> dict[str, Any]:
        if self.oip:
            return {"error": self.message, "type": self.error_type}
        return {"error": {"type": self.error_type, "message": self.message}}


class InvalidInput(RequestError):
    """The body is well-formed HTTP but not something this model can read."""

    error_type = "invalid_input"


class InvalidImage(InvalidInput):
    error_type = "invalid_image"


class InvalidText(InvalidInput):
    error_type = "invalid_text"


class PayloadTooLarge(RequestError):
    """Too big to process safely (bytes or decoded pixels); rejected before full decoding."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    error_type = "payload_too_large"


class InferenceFailed(RequestError):
    """The model failed on a batch (out of memory, unexpected error); the server keeps going."""

    status = HTTPStatus.INTERNAL_SERVER_ERROR
    error_type = "inference_failed"


class ResourceExhausted(InferenceFailed):
    """The accelerator or host ran out of memory for this batch; a retry may succeed."""

    status = HTTPStatus.SERVICE_UNAVAILABLE
    error_type = "resource_exhausted"


class InputsRejected(RequestError):
    """Every input of a multi-input request failed: the request takes the status of its
    first input's error, and its body still says what happened to each input."""

    error_type = "all_inputs_rejected"

    def __init__(self, status: int, body: dict[str, Any], count: int) -> None:
        super().__init__(
            f"all {count} inputs of the request were rejected; each input's error is in the body"
        )
        self.status = status
        self.body = body

    def to_body(self) -> dict[str, Any]:
        return {**super().to_body(), **self.body}


def error_for_exception(exc: BaseException) -> RequestError:
    """Map any exception raised while serving to the RequestError that answers it."""
    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return ResourceExhausted(f"out of memory while running the batch: {exc}")
    return InferenceFailed(f"{type(exc).__name__}: {exc}")
