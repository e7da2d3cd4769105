"""The image classifier's own rejection: a body that is no image it can decode (400)."""

from __future__ import annotations

from batchkit.errors import InvalidInput


class InvalidImage(InvalidInput):
    code = "invalid_image"
