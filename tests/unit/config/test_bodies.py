"""Base64 body sizes: the ceiling is the largest input whose body still fits."""

from __future__ import annotations

from tsbatch.config.bodies import base64_body, base64_ceiling


def test_the_ceiling_fits_and_a_kib_more_does_not() -> None:
    limit = 6553500
    ceiling = base64_ceiling(limit)
    assert ceiling % 1024 == 0
    assert base64_body(ceiling) <= limit < base64_body(ceiling + 1024)
