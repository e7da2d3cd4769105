"""The Open Inference Protocol's binary tensor extension: bodies in and out.

A binary body is a JSON header of ``Inference-Header-Content-Length`` bytes followed by
the raw tensors in input order, each ``parameters.binary_data_size`` bytes long; a BYTES
tensor is its elements one after another, each a 4-byte little-endian length and its
bytes. It is what tritonclient and the kserve SDK send by default, and the way to send an
image without base64 (a third smaller, no encode on either side). Every fault is an
``error(message)`` naming it, so the request that carried it gets a 400 of its own.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HEADER_LENGTH = "Inference-Header-Content-Length"
BINARY_CONTENT_TYPE = "application/octet-stream"
ELEMENT_PREFIX = struct.Struct("<I")

Error = Callable[[str], Exception]


@dataclass(frozen=True)
class BinaryBody:
    """A response body in the binary extension: ``data`` starts with a JSON header of
    ``header_length`` bytes, which the response announces in the same header."""

    data: bytes
    header_length: int


def header_length_of(headers: Mapping[str, Any]) -> str | None:
    """The request's ``Inference-Header-Content-Length`` value, whatever its case."""
    wanted = HEADER_LENGTH.lower()
    for name, value in headers.items():
        if isinstance(name, str) and name.lower() == wanted and isinstance(value, str):
            return value
    return None


def split_body(body: bytes, header_length: str, error: Error) -> tuple[dict[str, Any], bytes]:
    """The JSON header of a binary body and the tensor bytes that follow it."""
    try:
        length = int(header_length.strip())
    except ValueError:
        raise error(f"{HEADER_LENGTH} must be a whole number of bytes, got {header_length!r}") from None
    if length < 0 or length > len(body):
        raise error(f"{HEADER_LENGTH} is {length} but the body is {len(body)} bytes")
    try:
        document = json.loads(body[:length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(
            f"the first {length} bytes of the body ({HEADER_LENGTH}) are not a JSON header: {exc}"
        ) from exc
    if not isinstance(document, dict):
        raise error(f"the JSON header ({HEADER_LENGTH} bytes) must be an object")
    return document, body[length:]


def binary_data_size(tensor: Mapping[str, Any], error: Error) -> int | None:
    """The byte length a tensor's ``parameters.binary_data_size`` gives, or ``None``."""
    parameters = tensor.get("parameters") or {}
    if not isinstance(parameters, dict) or "binary_data_size" not in parameters:
        return None
    size = parameters["binary_data_size"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise error(f"binary_data_size must be a byte count of 0 or more, got {size!r}")
    return size


def take_tensor(data: bytes, size: int, name: str, error: Error) -> bytes:
    """The first ``size`` bytes after the header: tensor ``name``'s."""
    if size > len(data):
        raise error(
            f"input {name!r} has binary_data_size {size} but only {len(data)} bytes follow the JSON header"
        )
    return data[:size]


def bytes_elements(raw: bytes, expected: int, name: str, error: Error) -> list[bytes]:
    """The elements of a binary BYTES tensor; exactly ``expected`` of them (its shape)."""
    elements: list[bytes] = []
    offset = 0
    while offset < len(raw):
        if len(elements) == expected:
            raise error(
                f"input {name!r} holds more elements than its shape says ({expected}): "
                f"{len(raw) - offset} bytes are left after element {expected - 1}"
            )
        if offset + ELEMENT_PREFIX.size > len(raw):
            raise error(f"input {name!r}: element {len(elements)} has a truncated 4-byte length")
        (length,) = ELEMENT_PREFIX.unpack_from(raw, offset)
        offset += ELEMENT_PREFIX.size
        if offset + length > len(raw):
            raise error(
                f"input {name!r}: element {len(elements)} says {length} bytes but only "
                f"{len(raw) - offset} remain in the tensor (each BYTES element is a 4-byte "
                'little-endian length, then its bytes: a perf_analyzer --input-data "b64" '
                "holds that, not the file alone)"
            )
        elements.append(raw[offset : offset + length])
        offset += length
    if len(elements) != expected:
        raise error(f"input {name!r} holds {len(elements)} elements but its shape says {expected}")
    return elements


def encode_elements(elements: Sequence[bytes]) -> bytes:
    """A BYTES tensor in the binary extension: each element's 4-byte LE length, then it."""
    return b"".join(ELEMENT_PREFIX.pack(len(element)) + element for element in elements)


def binary_body(header: dict[str, Any], tensors: Sequence[bytes]) -> BinaryBody:
    """The JSON header (whose outputs carry their binary_data_size) and the tensors after it."""
    encoded = json.dumps(header).encode("utf-8")
    return BinaryBody(encoded + b"".join(tensors), len(encoded))
