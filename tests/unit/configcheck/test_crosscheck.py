"""Checks across models.yaml, config.properties and the store: each names the value to change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tsbatch.archive.manifest import load_manifest
from tsbatch.config.properties import replace_entry, update_model_settings
from tsbatch.configcheck.check import check, check_files, main
from tsbatch.paths import DEFAULT_MANIFEST, REPO_ROOT


@pytest.fixture
def properties(tmp_path: Path) -> Path:
    shutil.copy(REPO_ROOT / "config.properties", tmp_path / "config.properties")
    shutil.copy(REPO_ROOT / "metrics.yaml", tmp_path / "metrics.yaml")
    (tmp_path / "model-store").mkdir()
    return tmp_path / "config.properties"


def found(properties: Path, build_dir: Path) -> list[str]:
    manifest = load_manifest(DEFAULT_MANIFEST, build_dir=build_dir)
    return [str(problem) for problem in check(properties, manifest, include_archives=False)]


def set_entry(properties: Path, key: str, value: str) -> None:
    properties.write_text(replace_entry(properties.read_text(), key, f"{key}={value}\n"))


def test_the_shipped_files_agree(properties: Path, tmp_path: Path) -> None:
    assert [m for m in found(properties, tmp_path / "build") if "load_models" not in m] == []


def test_a_request_limit_below_max_body_bytes_says_which_value_to_change(
    properties: Path, tmp_path: Path
) -> None:
    set_entry(properties, "max_request_size", "1000000")
    messages = found(properties, tmp_path / "build")
    (resnet,) = [m for m in messages if "models.resnet18.max_body_bytes" in m]
    assert resnet.startswith("ERROR") and "max_request_size 1000000" in resnet
    assert "Lower max_body_bytes to 749568 (models.yaml), or raise max_request_size" in resnet
    set_entry(properties, "max_request_size", "20000000")
    (base64,) = [m for m in found(properties, tmp_path / "build") if "max_body_bytes" in m]
    assert base64.startswith("WARNING") and "as base64 JSON" in base64


def test_too_many_answers_for_the_response_limit(properties: Path, tmp_path: Path) -> None:
    set_entry(properties, "max_response_size", "2000")
    messages = [m for m in found(properties, tmp_path / "build") if "max_inputs_per_request" in m]
    assert any(
        "resnet18" in m and "max_response_size 2000" in m and "Lower max_inputs_per_request to" in m
        for m in messages
    )


def test_a_batch_size_above_the_export_bound(properties: Path, tmp_path: Path) -> None:
    update_model_settings(properties, "resnet18", {"batchSize": 32})
    (message,) = [m for m in found(properties, tmp_path / "build") if "models.resnet18.batchSize" in m]
    assert "exported for" in message and "Lower batchSize to 16 (config.properties)" in message


def test_decode_keys_only_on_a_model_that_decodes_images(properties: Path, tmp_path: Path) -> None:
    update_model_settings(properties, "bert_intent", {"decodeThreads": 2})
    (message,) = [m for m in found(properties, tmp_path / "build") if "models.bert_intent.decode" in m]
    assert message.startswith("ERROR") and "has no decode pool: remove decodeThreads" in message
    assert not [m for m in found(properties, tmp_path / "build") if "models.resnet18.decode" in m]


def test_load_models_against_the_manifest_and_the_store(properties: Path, tmp_path: Path) -> None:
    set_entry(properties, "load_models", " resnet18.mar , other.mar")
    messages = found(properties, tmp_path / "build")
    assert any("other is not a model of models.yaml" in m and m.startswith("ERROR") for m in messages)
    assert any("bert_intent is built from models.yaml but not served" in m for m in messages)
    set_entry(properties, "load_models", "")
    assert any("names no model" in m for m in found(properties, tmp_path / "build"))


def test_check_config_reports_a_manifest_typo(properties: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "models.yaml"
    manifest.write_text(DEFAULT_MANIFEST.read_text().replace("    max_length: 64", "    max_lenght: 64"))
    assert main(["--properties", str(properties), "--manifest", str(manifest), "--no-archives"]) == 1
    (typo,) = [p for p in check_files(properties, manifest, include_archives=False) if p.where == "manifest"]
    assert typo.severity == "error" and "did you mean `max_length`?" in typo.message
