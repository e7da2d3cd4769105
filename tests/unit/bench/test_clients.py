"""The cross-check's request: the body perf_analyzer sends, built the same for the raw client."""

from __future__ import annotations

import json

from batchkit.binary_tensors import bytes_elements
from batchkit.errors import InvalidInput
from tsbatch.bench.clients import one_input, v2_binary
from tsbatch.workloads.payloads import Payload


def test_v2_binary_is_one_bytes_element_of_shape_1_by_1_after_its_json_header() -> None:
    body, header_length = v2_binary("text", "café".encode())
    header = json.loads(body[:header_length])
    (tensor,) = header["inputs"]
    assert (tensor["name"], tensor["datatype"], tensor["shape"]) == ("text", "BYTES", [1, 1])
    assert header["outputs"] == [{"name": "predictions", "parameters": {"binary_data": True}}]
    raw = body[header_length:]
    assert tensor["parameters"]["binary_data_size"] == len(raw)
    assert bytes_elements(raw, 1, "text", InvalidInput) == ["café".encode()]


def test_one_input_skips_json_envelopes() -> None:
    pool = [Payload(b"{}", "application/json", "envelope"), Payload(b"hi", "text/plain", "text")]
    assert one_input(pool).body == b"hi"
