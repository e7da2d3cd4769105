"""The image kind's manifest entry: any torchvision classifier, by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.archive.manifest import ManifestError, validate_entry
from tsbatch.kinds.image.kind import IMAGE
from tsbatch.kinds.image.schema import ImageModel


def test_the_image_kind_takes_any_torchvision_classifier() -> None:
    entry = {"kind": "image", "handler": "h", "version": "1", "architecture": "mobilenet_v3_small"}
    assert ImageModel.model_validate(entry).architecture == "mobilenet_v3_small"


def test_an_unknown_architecture_is_refused_naming_the_close_match() -> None:
    entry = {"kind": "image", "handler": "h", "version": "1", "architecture": "resnet19"}
    with pytest.raises(ManifestError, match=r"`architecture`: .*'resnet19' is not a torchvision .*resnet18"):
        validate_entry("m", entry, Path("models.yaml"), IMAGE)
