"""Request bodies, built once per load-generator process: each kind's workload makes its
pool of single-input bodies (``tsbatch/kinds/<kind>/workload.py``); here they are packed
several to a request, in each envelope the handlers read.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass

# The request bodies that carry several inputs, in the order multi-input pools rotate them.
MULTI_INPUT_PROTOCOLS = ("list", "kserve_v1", "kserve_v2")


@dataclass(frozen=True)
class Payload:
    body: bytes
    content_type: str
    description: str  # e.g. "digit 96x64 PNG": shown in failure messages


def multi_input_body(values: list[str], list_key: str, protocol: str) -> bytes:
    """One request carrying ``values`` in our list schema, KServe v1 or KServe v2."""
    if protocol == "list":
        document: object = {list_key: values}
    elif protocol == "kserve_v1":
        document = {"instances": values}
    else:
        document = {
            "inputs": [{"name": list_key, "datatype": "BYTES", "shape": [len(values)], "data": values}]
        }
    return json.dumps(document).encode()


def multi_input_pool(
    pool: list[Payload], per_request: int, list_key: str, input_value: Callable[[Payload], str]
) -> list[Payload]:
    """Requests of ``per_request`` inputs each, drawn in turn from ``pool`` and rotating the
    protocols, so every body shape and every single payload is sent: ``input_value`` is one
    payload as an element of such a body, ``list_key`` our list's key (its kind's)."""
    values = itertools.cycle([input_value(payload) for payload in pool])
    requests = []
    for index in range(max(len(MULTI_INPUT_PROTOCOLS), -(-len(pool) // per_request))):
        protocol = MULTI_INPUT_PROTOCOLS[index % len(MULTI_INPUT_PROTOCOLS)]
        chunk = [next(values) for _ in range(per_request)]
        body = multi_input_body(chunk, list_key, protocol)
        requests.append(Payload(body, "application/json", f"{protocol} x{per_request} {list_key}"))
    return requests
