"""The image kind's own limit: an image sent as base64 JSON must still fit the frontend's."""

from __future__ import annotations

from tsbatch.archive.manifest import load_manifest
from tsbatch.kinds.image.kind import IMAGE


def test_base64_images_above_the_request_limit_are_a_warning() -> None:
    entry = load_manifest().model("resnet18").config  # max_body_bytes 16 MiB
    assert IMAGE.limits("m", entry, 23068672) == []  # config.properties' max_request_size
    (problem,) = IMAGE.limits("m", entry, 20_000_000)
    assert (
        problem.severity == "warning" and problem.where == "m.max_body_bytes" and "base64" in problem.message
    )
    assert IMAGE.limits("m", entry, 16 * 1024 * 1024) == []  # the common check's error, not this warning
