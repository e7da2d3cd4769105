"""How large a request body gets around its input, for the checks of every model kind."""

from __future__ import annotations

JSON_ENVELOPE_BYTES = 64  # {"image": "..."} or {"images": [...]} around the base64


def base64_body(size: int) -> int:
    """The bytes of an input of ``size`` bytes sent as base64 in a JSON body."""
    return -(-size * 4 // 3) + JSON_ENVELOPE_BYTES


def base64_ceiling(request_limit: int) -> int:
    """The largest input whose base64 JSON body still fits ``request_limit``, in whole KiB."""
    return (request_limit - JSON_ENVELOPE_BYTES) * 3 // 4 // 1024 * 1024
