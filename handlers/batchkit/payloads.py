"""Getting the body out of a TorchServe request, whatever shape the worker gave it.

TorchServe's Python worker already decodes ``application/json`` bodies to objects and
``text/*`` bodies to ``str`` (falling back to raw bytes when that fails), and multipart
forms arrive as one key per field. The handlers see all of these (``protocols`` reads
the request's parameters; these helpers read one body).
"""

from __future__ import annotations

import json
from typing import Any

from batchkit.errors import InvalidInput, PayloadTooLarge, RequestRejected


def check_size(body: Any, max_bytes: int) -> None:
    if isinstance(body, bytes | bytearray | str) and len(body) > max_bytes:
        raise PayloadTooLarge(f"request body is {len(body)} bytes; the limit is {max_bytes}")


def parse_json_object(body: Any, error: type[RequestRejected] = InvalidInput) -> dict[str, Any] | None:
    """The body as a JSON object when it is one (decoded or raw), else ``None``.

    ``error`` is the RequestRejected subclass raised for a malformed document, so each
    model reports errors in its own terms (invalid_image, invalid_text).
    """
    if isinstance(body, dict):
        return body
    raw = body
    if isinstance(raw, bytes | bytearray):
        stripped = bytes(raw).lstrip()
        if not stripped.startswith(b"{"):
            return None
        try:
            raw = stripped.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error("JSON body is not valid UTF-8") from exc
    if isinstance(raw, str):
        if not raw.lstrip().startswith("{"):
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise error(f"body is not valid JSON: {exc.msg} at position {exc.pos}") from exc
        if not isinstance(value, dict):
            raise error("JSON body must be an object")
        return value
    return None
