"""The text classifier's own rejection: a body that is no text it can classify (400)."""

from __future__ import annotations

from batchkit.errors import InvalidInput


class InvalidText(InvalidInput):
    code = "invalid_text"
