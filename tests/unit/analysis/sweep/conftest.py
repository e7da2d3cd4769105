"""A swept model made from the tiny image archive of tests/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbatch.analysis.sweep.swept import SweptModel
from tsbatch.kinds.image.sweep import archive_swept_model


@pytest.fixture
def tiny_swept_model(tiny_image_model_dir: tuple[Path, dict]) -> SweptModel:
    model_dir, model_yaml = tiny_image_model_dir
    (model_dir / "handler_config.json").write_text(json.dumps(model_yaml["handler"]))
    return archive_swept_model("tiny", model_dir)
