"""Request errors: each carries its HTTP status and its JSON body (batchkit/errors.py)."""

from __future__ import annotations

import torch

from batchkit.errors import (
    InferenceFailed,
    InvalidImage,
    InvalidInput,
    PayloadTooLarge,
    ResourceExhausted,
    error_for_exception,
)


def test_error_body_shape() -> None:
    body = InvalidInput("empty body").to_body()
    assert body == {"error": {"type": "invalid_input", "message": "empty body"}}


def test_each_error_carries_its_status() -> None:
    assert (InvalidImage("x").status, InvalidImage("x").phrase) == (400, "Bad Request")
    assert PayloadTooLarge("x").status == 413
    assert InferenceFailed("x").status == 500
    assert ResourceExhausted("x").status == 503


def test_exceptions_map_to_the_error_that_answers_them() -> None:
    request_error = InvalidInput("bad")
    assert error_for_exception(request_error) is request_error
    assert isinstance(error_for_exception(MemoryError()), ResourceExhausted)
    assert isinstance(
        error_for_exception(torch.cuda.OutOfMemoryError("CUDA out of memory")), ResourceExhausted
    )
    unexpected = error_for_exception(KeyError("boom"))
    assert type(unexpected) is InferenceFailed and unexpected.message == "KeyError: 'boom'"
