"""Fixtures shared by unit and integration tests: tiny models and a fake TorchServe context."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image

from tests.fakes import FakeContext, RecordingMetrics
from tsbatch.paths import REPO_ROOT

TINY_LABELS = ["circle", "square", "triangle"]


class TinyImageNet(torch.nn.Module):
    """A few-parameter CNN with the ResNet handler's contract: (N,3,H,W) -> (N,classes)."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.features = torch.nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)  # what freezing folds into the convolution
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.running_var.uniform_(0.5, 2.0)
        self.head = torch.nn.Linear(4, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        pooled = torch.relu(self.norm(self.features(images))).mean(dim=(2, 3))
        return self.head(pooled)


def tiny_encoder() -> torch.nn.Module:
    """A randomly initialised two-layer BERT: the intent model's encoder, small enough for tests."""
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return BertModel(config)


def declared_metrics() -> dict[str, object]:
    """Model metrics declared in the repository's metrics.yaml, as TorchServe would load them."""
    from ts.metrics.metric_type_enum import MetricTypes

    document = yaml.safe_load((REPO_ROOT / "metrics.yaml").read_text())
    declared: dict[str, object] = {}
    for kind, entries in document["model_metrics"].items():
        for entry in entries:
            declared[entry["name"]] = MetricTypes(kind)
    return declared


def tiny_handler_config() -> dict:
    """The ResNet handler's config for the tiny model (16x16 crops, three labels)."""
    return {
        "model_name": "tiny",
        "architecture": "tiny-cnn",
        "model_file": "model.pt",
        "labels_file": "labels.json",
        "weights": "random (test fixture)",
        "resize_size": 20,
        "crop_size": 16,
        "mean": [0.5, 0.5, 0.5],
        "std": [0.25, 0.25, 0.25],
        "top_k": 2,
        "max_image_pixels": 1_000_000,
        "max_body_bytes": 2_000_000,
        "torch_threads": 1,
        "warmup_batch_sizes": [1],
    }


@pytest.fixture
def tiny_image_model_dir(tmp_path: Path) -> tuple[Path, dict]:
    """An unpacked 'archive' for the ResNet handler with a tiny TorchScript model."""
    torch.manual_seed(0)
    scripted = torch.jit.script(TinyImageNet(len(TINY_LABELS)).eval())
    scripted.save(str(tmp_path / "model.pt"))
    (tmp_path / "labels.json").write_text(json.dumps(TINY_LABELS))
    handler = tiny_handler_config()
    return tmp_path, {"batchSize": 4, "maxBatchDelay": 5, "handler": handler}


@pytest.fixture(scope="session")
def tiny_compiled_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny_image_model_dir model (same seed) as a CPU fp32 AOTInductor package for
    batches of up to 4: compiled once per session (tens of seconds)."""
    from tsbatch.build.compiled import compile_package

    torch.manual_seed(0)
    model = TinyImageNet(len(TINY_LABELS)).eval()
    path = tmp_path_factory.mktemp("compiled") / "model.cpu-fp32.pt2"
    batch = torch.export.Dim("batch", min=1, max=4)
    compile_package(model, (torch.randn(2, 3, 16, 16),), ({0: batch},), "cpu-fp32", path)
    return path


@pytest.fixture
def tiny_compiled_model_dir(tiny_image_model_dir: tuple[Path, dict], tiny_compiled_package: Path):
    """tiny_image_model_dir with the compiled package in the archive and its config."""
    model_dir, config = tiny_image_model_dir
    shutil.copy2(tiny_compiled_package, model_dir / tiny_compiled_package.name)
    config["handler"].update(
        compiled_models=[tiny_compiled_package.name],
        compiled_max_batch_size=4,
        precision="fp32",
        runtime="aoti",
    )
    return model_dir, config


@pytest.fixture
def fake_context_factory():
    def make(model_dir: Path, model_yaml_config: dict, batch_size: int = 4) -> FakeContext:
        return FakeContext(model_dir, model_yaml_config, batch_size, RecordingMetrics(declared_metrics()))

    return make


def image_bytes(
    fmt: str = "PNG",
    size: tuple[int, int] = (40, 30),
    mode: str = "RGB",
    color: object = "red",
    **save_args: object,
) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, color).save(buffer, format=fmt, **save_args)
    return buffer.getvalue()


@pytest.fixture(scope="session")
def tiny_int8_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny_image_model_dir model (same seed) statically quantized to int8 and compiled
    for CPU batches of up to 4 (once per session, tens of seconds)."""
    from tsbatch.build.int8.quantize import compile_int8

    torch.manual_seed(0)
    model = TinyImageNet(len(TINY_LABELS)).eval()
    path = tmp_path_factory.mktemp("int8") / "model.cpu-int8.pt2"
    batch = torch.export.Dim("batch", min=1, max=4)
    images = torch.randn(32, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    calibration = [(chunk,) for chunk in images.split(4)]
    compile_int8(model, (images[:2],), ({0: batch},), path, calibration)
    return path
