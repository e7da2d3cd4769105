"""When the build re-exports a model: missing artifacts, or changed manifest entry or inputs."""

from __future__ import annotations

from pathlib import Path

from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec, validate_entry
from tsbatch.archive.pipeline import EXPORT_INPUTS_FILE, export_inputs, needs_export
from tsbatch.kinds.text.kind import TEXT


def make_spec(root: Path, **settings: object) -> ModelSpec:
    entry = {"kind": "text", "handler": "handlers/text_classifier_handler.py", "version": "1.0", **settings}
    config = validate_entry("m", entry, root / "models.yaml", TEXT)
    return ModelSpec(name="m", kind=TEXT, config=config, build_dir=root / "build", root=root)


# What a text export writes as its worker config, at the least.
HANDLER_CONFIG = {
    "model_name": "m",
    "model_file": artifacts.MODEL_FILE,
    "labels_file": artifacts.LABELS_FILE,
    "base_model": "tiny",
    "tokenizer_dir": "tokenizer",
    "oos_threshold": 0.0,
}


def export_here(spec: ModelSpec, root: Path) -> None:
    spec.artifact_dir.mkdir(parents=True, exist_ok=True)
    for name in (artifacts.MODEL_FILE, artifacts.LABELS_FILE):
        (spec.artifact_dir / name).write_text("x")
    artifacts.write_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, HANDLER_CONFIG)
    artifacts.write_json(spec.artifact_dir / EXPORT_INPUTS_FILE, export_inputs(spec, root))


def test_missing_artifacts_are_exported(tmp_path: Path) -> None:
    spec = make_spec(tmp_path)
    assert needs_export(spec, tmp_path).startswith("no handler_config.json, labels.json in ")
    export_here(spec, tmp_path)
    (spec.artifact_dir / artifacts.MODEL_FILE).unlink()
    assert needs_export(spec, tmp_path).startswith("no model.pt in ")


def test_an_export_without_torchscript_needs_no_model_file(tmp_path: Path) -> None:
    """An exported program that does not trace into TorchScript: its handler config says so."""
    spec = make_spec(tmp_path)
    export_here(spec, tmp_path)
    (spec.artifact_dir / artifacts.MODEL_FILE).unlink()
    artifacts.write_json(
        spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, {**HANDLER_CONFIG, "model_file": ""}
    )
    assert needs_export(spec, tmp_path) is None


def test_current_artifacts_are_kept_and_handler_edits_do_not_count(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("text,label\nhi,greet\n")
    spec = make_spec(tmp_path, data={"train": "train.csv"}, max_length=64)
    export_here(spec, tmp_path)
    assert needs_export(spec, tmp_path) is None
    edited = spec.with_settings(handler="handlers/other.py")
    assert needs_export(edited, tmp_path) is None
    serving = spec.with_settings(max_inputs_per_request=8)
    assert needs_export(serving, tmp_path) is None


def test_changed_manifest_entry_or_data_file_is_exported_again(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("text,label\nhi,greet\n")
    spec = make_spec(tmp_path, data={"train": "train.csv"}, max_length=64)
    export_here(spec, tmp_path)
    longer = spec.with_settings(max_length=128)
    assert needs_export(longer, tmp_path) == "its manifest entry changed"
    (tmp_path / "train.csv").write_text("text,label\nhi,greet\nbye,farewell\n")
    assert needs_export(spec, tmp_path) == "its input files changed (train.csv)"


def test_artifacts_without_a_stamp_are_exported_again(tmp_path: Path) -> None:
    spec = make_spec(tmp_path)
    export_here(spec, tmp_path)
    (spec.artifact_dir / EXPORT_INPUTS_FILE).unlink()
    assert needs_export(spec, tmp_path) == "artifacts predate export stamps"


def test_an_export_by_another_toolkit_version_is_exported_again(tmp_path: Path) -> None:
    spec = make_spec(tmp_path)
    export_here(spec, tmp_path)
    assert needs_export(spec, tmp_path) is None
    older = {**HANDLER_CONFIG, "int8_speedup": 0.0}  # a field this toolkit's worker no longer has
    artifacts.write_json(spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE, older)
    reason = needs_export(spec, tmp_path)
    assert reason is not None and "does not fit this toolkit's" in reason and "int8_speedup" in reason


def test_a_changed_file_inside_a_weights_folder_is_exported_again(tmp_path: Path) -> None:
    folder = tmp_path / "my-classifier"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    spec = make_spec(tmp_path, weights={"path": "my-classifier"})
    export_here(spec, tmp_path)
    assert needs_export(spec, tmp_path) is None
    (folder / "model.safetensors").write_bytes(b"new weights")
    assert needs_export(spec, tmp_path) == "its input files changed (my-classifier)"
