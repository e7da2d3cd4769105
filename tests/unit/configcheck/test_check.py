"""The config checker explains mistakes, including archives that disagree with the file."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import yaml

from tsbatch.config.properties import read_properties, update_model_settings
from tsbatch.configcheck.check import check, main
from tsbatch.paths import REPO_ROOT


def copy_config(tmp_path: Path) -> Path:
    shutil.copy(REPO_ROOT / "config.properties", tmp_path / "config.properties")
    shutil.copy(REPO_ROOT / "metrics.yaml", tmp_path / "metrics.yaml")
    (tmp_path / "model-store").mkdir()
    return tmp_path / "config.properties"


def messages(problems) -> list[str]:
    return [str(p) for p in problems]


def test_shipped_config_has_no_problems_of_its_own(tmp_path: Path) -> None:
    path = copy_config(tmp_path)
    assert check(path, include_archives=False) == []


def test_typos_and_unsafe_settings_are_explained(tmp_path: Path) -> None:
    path = copy_config(tmp_path)
    update_model_settings(path, "resnet18", {"batchsize": 4, "maxBatchDelay": 0})
    text = path.read_text().replace(
        "inference_address=http://127.0.0.1:8080", "inference_adress=http://0.0.0.0:8080"
    )
    text = text.replace("disable_token_authorization=false", "disable_token_authorization=true")
    path.write_text(text)
    found = messages(check(path, include_archives=False))
    assert any("models.resnet18.batchsize" in m and "Did you mean 'batchSize'" in m for m in found)
    assert any("inference_adress" in m and "Did you mean 'inference_address'" in m for m in found)
    assert any("token auth is off" in m for m in found)
    update_model_settings(path, "resnet18", {"batchSize": 8, "minWorkers": 3, "maxWorkers": 2})
    found = messages(check(path, include_archives=False))
    assert any("minWorkers" in m and "more than maxWorkers" in m for m in found)
    assert main(["--properties", str(path), "--no-archives"]) == 1


def write_archive(store: Path, name: str, config: dict) -> None:
    with zipfile.ZipFile(store / f"{name}.mar", "w") as archive:
        archive.writestr("model-config.yaml", yaml.safe_dump(config))


def test_archive_disagreeing_with_config_is_an_error(tmp_path: Path) -> None:
    path = copy_config(tmp_path)
    store = tmp_path / "model-store"
    baked = {
        "minWorkers": 1,
        "maxWorkers": 1,
        "batchSize": 8,
        "maxBatchDelay": 10,
        "responseTimeout": 60,
        "handler": {"torch_threads": 1},
    }
    write_archive(store, "resnet18", {**baked, "handler": {"torch_threads": 1, "decode_threads": "auto"}})
    write_archive(store, "bert_intent", {**baked, "maxBatchDelay": 5})
    assert check(path) == []

    update_model_settings(path, "resnet18", {"decodeThreads": 2})
    found = messages(check(path))
    assert any("decodeThreads: archive auto vs config.properties 2" in m for m in found), found
    update_model_settings(path, "resnet18", {"decodeThreads": "auto"})

    update_model_settings(path, "resnet18", {"batchSize": 16})
    found = messages(check(path))
    assert len(found) == 1
    assert "resnet18.mar" in found[0] and "batchSize: archive 8 vs config.properties 16" in found[0]
    assert "make archive" in found[0]


def test_decode_settings_are_checked_and_counted_with_the_other_models_threads(tmp_path: Path) -> None:
    path = copy_config(tmp_path)
    update_model_settings(path, "resnet18", {"decodeThreads": 0, "decodePath": "gpu"})
    found = messages(check(path, include_archives=False))
    assert any("models.resnet18.decodeThreads" in m and "at least 1" in m for m in found)
    update_model_settings(path, "resnet18", {"decodeThreads": 1})
    found = messages(check(path, include_archives=False))
    assert any("models.resnet18.decodePath" in m and "auto, pil, tensor" in m for m in found)
    update_model_settings(path, "resnet18", {"decodePath": "pil", "reducedDecode": "yes"})
    found = messages(check(path, include_archives=False))
    assert any("models.resnet18.reducedDecode" in m and "auto, on, off" in m for m in found), found
    update_model_settings(
        path,
        "resnet18",
        {"reducedDecode": "off", "decodePath": "tensor", "decodeThreads": os.cpu_count() or 1},
    )
    found = messages(check(path, include_archives=False))
    assert any("max(torchThreads, decodeThreads)" in m and "cores" in m for m in found), found
    # auto counts as 1 against the cores: the shipped layout (one worker per model) fits
    update_model_settings(path, "resnet18", {"decodeThreads": "auto"})
    found = messages(check(path, include_archives=False))
    assert not any("max(torchThreads, decodeThreads)" in m for m in found), found
    update_model_settings(path, "resnet18", {"maxWorkers": os.cpu_count() or 1})
    found = messages(check(path, include_archives=False))
    assert any("an auto pool counts as 1" in m for m in found), found


def test_the_queue_size_and_deadline_budget_are_baked_and_checked_against_the_archive(tmp_path: Path) -> None:
    """TorchServe reads a model's jobQueueSize from its archive only, and the budget is the
    worker's: check-config compares both with the archive, and their values are checked."""
    path = copy_config(tmp_path)
    store = tmp_path / "model-store"
    baked = {"minWorkers": 1, "maxWorkers": 1, "batchSize": 8, "maxBatchDelay": 10, "responseTimeout": 60}
    write_archive(store, "resnet18", {**baked, "handler": {"torch_threads": 1, "decode_threads": "auto"}})
    write_archive(store, "bert_intent", {**baked, "maxBatchDelay": 5, "handler": {"torch_threads": 1}})
    update_model_settings(path, "resnet18", {"jobQueueSize": 16, "deadlineBudgetMs": 800})
    found = messages(check(path))
    assert len(found) == 1, found
    assert "jobQueueSize: archive None vs config.properties 16" in found[0]
    assert "deadlineBudgetMs: archive 0 vs config.properties 800" in found[0]
    handler = {"torch_threads": 1, "decode_threads": "auto", "deadline_budget_ms": 800}
    write_archive(store, "resnet18", {**baked, "jobQueueSize": 16, "handler": handler})
    assert check(path) == []
    update_model_settings(path, "bert_intent", {"deadlineBudgetMs": -1})
    found = messages(check(path, include_archives=False))
    assert any("models.bert_intent.deadlineBudgetMs" in m and "at least 0" in m for m in found), found


def test_keys_left_out_are_noted_not_refused_and_the_archive_checked_against_their_defaults(
    tmp_path: Path,
) -> None:
    import json

    from tsbatch.config.properties import format_models, replace_entry

    path = copy_config(tmp_path)
    text = path.read_text()
    document = json.loads(read_properties(path)["models"])
    for key in ("responseTimeout", "maxBatchDelay", "torchThreads"):
        del document["bert_intent"]["1.0"][key]
    path.write_text(replace_entry(text, "models", format_models(document)))
    problems = check(path, include_archives=False)
    assert {p.severity for p in problems} == {"note"}, messages(problems)
    noted = "NOTE    models.bert_intent.responseTimeout: left out: 60 baked into the archive (default_response_timeout)."
    assert noted in messages(problems)  # the shipped file sets default_response_timeout=60
    assert main(["--properties", str(path), "--no-archives", "--strict"]) == 0
    store = tmp_path / "model-store"
    baked = {"minWorkers": 1, "maxWorkers": 1, "batchSize": 8, "maxBatchDelay": 10, "responseTimeout": 60}
    write_archive(store, "resnet18", {**baked, "handler": {"torch_threads": 1, "decode_threads": "auto"}})
    defaulted = {**baked, "maxBatchDelay": 100}
    write_archive(store, "bert_intent", {**defaulted, "handler": {"torch_threads": 1}})
    assert {p.severity for p in check(path)} == {"note"}
    write_archive(store, "bert_intent", {**baked, "handler": {"torch_threads": 1}})
    assert any("maxBatchDelay: archive 10 vs config.properties 100" in m for m in messages(check(path)))
