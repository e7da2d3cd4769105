"""A sweep target made from the tiny image archive of tests/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbatch.analysis.sweep.targets import Target
from tsbatch.kinds.image.sweep import archive_target


@pytest.fixture
def tiny_target(tiny_image_model_dir: tuple[Path, dict]) -> Target:
    model_dir, model_yaml = tiny_image_model_dir
    (model_dir / "handler_config.json").write_text(json.dumps(model_yaml["handler"]))
    return archive_target("tiny", model_dir)
