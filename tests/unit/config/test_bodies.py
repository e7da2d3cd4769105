"""Base64 body sizes: the ceiling is the largest input whose body still fits."""

from __future__ import annotations

from tsbatch.config.bodies import base64_body, base64_ceiling


def test_the_ceiling_fits_and_a_kib_more_does_not() -> None:
    limit = 6553500
    ceiling = base64_ceiling(limit)
    assert ceiling % 1024 == 0
    assert base64_body(ceiling) <= limit < base64_body(ceiling + 1024)


def test_the_shipped_limits_take_a_phone_photo_in_every_form() -> None:
    """A 12 MP phone JPEG is up to 8 MB: as base64 JSON it must fit max_request_size, and any
    image the image handler takes (max_body_bytes) must too."""
    from tsbatch.archive.manifest import load_manifest
    from tsbatch.config.properties import read_properties
    from tsbatch.paths import DEFAULT_PROPERTIES

    request_limit = int(read_properties(DEFAULT_PROPERTIES)["max_request_size"])
    body_limit = load_manifest().model("resnet18").config.max_body_bytes
    assert 8_000_000 < body_limit < request_limit
    assert base64_body(body_limit) <= request_limit
