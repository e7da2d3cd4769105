"""A config given to the container wins: archives repackaged from it when they disagree,
left alone when they agree, and a config with errors stops the start (real archiver)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import package
from tsbatch.config.properties import replace_entry, update_model_settings
from tsbatch.configcheck.check import archive_model_config
from tsbatch.container.startup import StartupError, kserve_storage, prepare
from tsbatch.environment import Environment
from tsbatch.paths import DEFAULT_PROPERTIES

MODEL = "resnet18"


@pytest.fixture
def image(tmp_path: Path, tiny_image_model_dir) -> tuple[Manifest, Path]:
    """An 'image': exported artifacts, a store packaged from its config, and that config."""
    model_dir, config = tiny_image_model_dir
    build = tmp_path / "build"
    shutil.copytree(model_dir, build / MODEL)
    artifacts.write_json(build / MODEL / artifacts.HANDLER_CONFIG_FILE, config["handler"])
    manifest = replace(load_manifest(), build_dir=build, model_store=tmp_path / "image-store")
    manifest = replace(manifest, models={MODEL: replace(manifest.model(MODEL), build_dir=build)})
    properties = tmp_path / "config.properties"
    text = DEFAULT_PROPERTIES.read_text()
    for key, value in {"load_models": f"{MODEL}.mar", "model_store": str(manifest.model_store)}.items():
        text = replace_entry(text, key, f"{key}={value}\n")
    properties.write_text(text)
    shutil.copy(DEFAULT_PROPERTIES.parent / "metrics.yaml", tmp_path / "metrics.yaml")
    package(manifest.model(MODEL), manifest, properties)
    return manifest, properties


def command(store: Path, properties: Path) -> list[str]:
    return [
        "torchserve",
        "--start",
        "--foreground",
        "--model-store",
        str(store),
        "--ts-config",
        str(properties),
    ]


def test_agreeing_archives_are_served_as_built(image, tmp_path: Path) -> None:
    manifest, properties = image
    given = command(manifest.model_store, properties)
    assert prepare(given, tmp_path / "writable", manifest) == given
    assert not (tmp_path / "writable").exists()


def test_a_changed_batch_size_is_repackaged_into_the_writable_store(image, tmp_path: Path) -> None:
    manifest, properties = image
    update_model_settings(properties, MODEL, {"batchSize": 3, "maxBatchDelay": 7})
    writable = tmp_path / "writable"
    result = prepare(command(manifest.model_store, properties), writable, manifest)
    assert result[result.index("--model-store") + 1] == str(writable)
    baked = archive_model_config(writable / f"{MODEL}.mar")
    assert (baked["batchSize"], baked["maxBatchDelay"]) == (3, 7)
    assert archive_model_config(manifest.model_store / f"{MODEL}.mar")["batchSize"] != 3, "image left alone"


def test_a_config_with_errors_does_not_start(image, tmp_path: Path) -> None:
    manifest, properties = image
    properties.write_text(properties.read_text().replace("job_queue_size=64", "job_queue_size=lots"))
    with pytest.raises(StartupError, match="1 error") as raised:
        prepare(command(manifest.model_store, properties), tmp_path / "writable", manifest)
    assert [problem.where for problem in raised.value.problems] == ["job_queue_size"]


def test_archives_from_kserve_storage_are_never_repackaged(image, tmp_path: Path) -> None:
    manifest, properties = image
    downloaded = tmp_path / "mnt-models"
    shutil.copytree(manifest.model_store, downloaded / "model-store")
    shutil.copy(properties, downloaded / "config.properties")
    given = command(manifest.model_store, Path("/app/deploy/config.cluster.properties"))
    assert kserve_storage(given, Environment.read({}), downloaded) == given, (
        "no STORAGE_URI: the image's archives"
    )
    result = kserve_storage(given, Environment.read({"STORAGE_URI": "s3://bucket/models"}), downloaded)
    assert result == command(downloaded / "model-store", downloaded / "config.properties")
    update_model_settings(downloaded / "config.properties", MODEL, {"batchSize": 5})
    with pytest.raises(StartupError, match="disagree"):
        prepare(result, tmp_path / "writable", manifest, repackage=False)
    with pytest.raises(StartupError, match=r"no \.mar"):
        kserve_storage(given, Environment.read({"STORAGE_URI": "s3://x"}), tmp_path / "empty")


def test_other_commands_run_as_given(tmp_path: Path) -> None:
    assert prepare(["bash"], tmp_path) == ["bash"]
    assert prepare(["locust", "-f", "x"], tmp_path) == ["locust", "-f", "x"]
