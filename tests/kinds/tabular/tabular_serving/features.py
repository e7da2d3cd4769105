"""One request body to one row of features: ``{"features": [numbers]}`` (JSON), the list
itself, or that list as a JSON string (how a KServe BYTES element or our list carries it)."""

from __future__ import annotations

import json
import math
from typing import Any

import torch

from batchkit.payloads import check_size, parse_json_object
from batchkit.protocols import InputSchema
from tabular_serving.errors import InvalidFeatures

FEATURES_KEY = "features"
TABULAR_INPUTS = InputSchema(single_key=FEATURES_KEY, list_key="rows", error=InvalidFeatures)


def features_from_body(body: Any, num_features: int, max_body_bytes: int) -> torch.Tensor:
    """The row as a float tensor of ``num_features``; InvalidFeatures saying what to send otherwise."""
    check_size(body, max_body_bytes)
    document = parse_json_object(body, InvalidFeatures)
    if document is None:
        raise InvalidFeatures(f'expected a JSON object {{"{FEATURES_KEY}": [{num_features} numbers]}}')
    if set(document) != {FEATURES_KEY}:
        raise InvalidFeatures(
            f'JSON body must be {{"{FEATURES_KEY}": [...]}} (several: {{"rows": [...]}} or a list of '
            f"such objects); got keys {sorted(document)}"
        )
    row = document[FEATURES_KEY]
    if isinstance(row, str):
        try:
            row = json.loads(row)
        except json.JSONDecodeError as exc:
            raise InvalidFeatures(f'"{FEATURES_KEY}" is a string but not a JSON list: {exc.msg}') from exc
    if not isinstance(row, list) or len(row) != num_features:
        got = f"{len(row)} values" if isinstance(row, list) else type(row).__name__
        raise InvalidFeatures(f'"{FEATURES_KEY}" must be a list of {num_features} numbers, got {got}')
    for index, value in enumerate(row):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidFeatures(f'"{FEATURES_KEY}"[{index}] must be a finite number, got {value!r}')
    return torch.tensor(row, dtype=torch.float32)
