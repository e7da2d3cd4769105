"""Request errors: immutable values with their HTTP status, made once from what a decoder
raises (batchkit/errors.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from batchkit.errors import (
    InferenceFailed,
    InvalidInput,
    PayloadTooLarge,
    RequestError,
    ResourceExhausted,
    error_for_exception,
    inputs_rejected,
)
from image_serving.errors import InvalidImage


def test_each_rejection_maps_to_its_status_and_code() -> None:
    assert InvalidImage.error("x") == RequestError(400, "invalid_image", "x")
    assert InvalidImage.error("x").phrase == "Bad Request"
    assert (PayloadTooLarge.error("x").status, PayloadTooLarge.error("x").code) == (413, "payload_too_large")
    assert InferenceFailed.error("x").status == 500
    assert ResourceExhausted.error("x").status == 503


def test_an_error_is_an_immutable_value() -> None:
    error = InvalidInput.error("empty body")
    field = "message"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(error, field, "changed")
    assert error == InvalidInput.error("empty body") and hash(error) == hash(InvalidInput.error("empty body"))


def test_exceptions_map_to_the_error_that_answers_them() -> None:
    assert error_for_exception(InvalidInput("bad")) == RequestError(400, "invalid_input", "bad")
    assert error_for_exception(MemoryError()).code == "resource_exhausted"
    assert error_for_exception(torch.cuda.OutOfMemoryError("CUDA out of memory")).status == 503
    assert error_for_exception(KeyError("boom")) == RequestError(500, "inference_failed", "KeyError: 'boom'")


def test_a_request_whose_inputs_all_failed_takes_its_first_error_status() -> None:
    rejected = inputs_rejected(PayloadTooLarge.error("big"), 2)
    assert (rejected.status, rejected.code) == (413, "all_inputs_rejected")
    assert rejected.message == (
        "all 2 inputs of the request were rejected (the first: big); each input's error is in the body"
    )
