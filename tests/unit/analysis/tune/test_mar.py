"""Any archive, repackaged per tuning point: its model-config.yaml rewritten, the rest as it was."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tsbatch.analysis.tune.cli import build_parser, main, tuning_run
from tsbatch.analysis.tune.mar import MarError, models_entry_base, read_mar, repackage
from tsbatch.config.properties import model_settings, read_properties, with_model_settings

MakeMar = Callable[..., Path]  # the make_mar fixture (tests/unit/analysis/conftest.py)
SETTINGS = {"batchSize": 8, "maxBatchDelay": 5, "minWorkers": 2, "maxWorkers": 2}


def entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_repackaging_rewrites_only_the_batch_settings(make_mar: MakeMar, tmp_path: Path) -> None:
    info = read_mar(make_mar("in.mar", {"batchSize": 4, "maxBatchDelay": 20, "responseTimeout": 9}))
    assert (info.model, info.version, info.toolkit_built) == ("stock_mobilenet", "2.0", False)
    assert info.entry == {"batchSize": 4, "maxBatchDelay": 20, "responseTimeout": 9}
    assert (
        info.settings.key == (4, 20, None) and info.settings.response_timeout_s == 9
    )  # read as TorchServe would
    out = read_mar(repackage(info, tmp_path / "store" / "stock_mobilenet.mar", SETTINGS))
    assert out.config == {**SETTINGS, "responseTimeout": 9}
    before, after = entries(info.path), entries(out.path)
    assert set(before) == set(after)
    assert all(after[name] == before[name] for name in ("model.pt", "index_to_name.json"))


def test_an_archive_without_a_config_file_gets_one_named_in_its_manifest(
    make_mar: MakeMar, tmp_path: Path
) -> None:
    info = read_mar(make_mar("in.mar", None))
    assert info.config_file is None and info.entry == {}
    out = read_mar(repackage(info, tmp_path / "out.mar", SETTINGS))
    assert out.config_file == "model-config.yaml" and out.entry == SETTINGS


def test_the_models_entry_names_the_archive_alone(make_mar: MakeMar, tmp_path: Path) -> None:
    info = read_mar(make_mar("mobile.mar", None))
    properties = tmp_path / "entry.properties"
    properties.write_text(with_model_settings(models_entry_base(info), {info.model: SETTINGS}))
    settings = model_settings(read_properties(properties))
    assert settings == {"stock_mobilenet": {"defaultVersion": True, "marName": "mobile.mar", **SETTINGS}}


def test_not_an_archive_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "x.mar").write_text("hello")
    with pytest.raises(MarError, match="not a readable TorchServe model archive"):
        read_mar(tmp_path / "x.mar")


def test_tuning_an_archive_needs_its_requests_and_an_sla(
    make_mar: MakeMar, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mar = make_mar("in.mar", {"batchSize": 4})
    assert main(["--mar", str(mar), "--p99-ms", "500"]) == 1
    assert "--requests MODEL=PATH" in capsys.readouterr().err
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.jpg").write_bytes(b"jpeg")
    assert main(["--mar", str(mar), "--requests", str(tmp_path / "pics")]) == 1
    assert "--p99-ms" in capsys.readouterr().err  # no SLA entry and no targets
    run = tuning_run(
        build_parser().parse_args(
            ["--mar", str(mar), "--requests", str(tmp_path / "pics"), "--p99-ms", "500"]
        )
    )
    assert run.names == ["stock_mobilenet"] and run.current["stock_mobilenet"].key == (4, 100, None)
    assert (
        run.slas["stock_mobilenet"].p99_ms == 500
        and run.workloads["stock_mobilenet"].payloads[0].body == b"jpeg"
    )
    assert main(["--mar", str(mar), "--model", "other", "--requests", "x", "--p99-ms", "5"]) == 1
    assert "drop --model" in capsys.readouterr().err


def test_a_toolkit_archives_decode_pool_is_set_in_its_handler_config(
    make_mar: MakeMar, tmp_path: Path
) -> None:
    from tsbatch.analysis.tune.point import with_decode_threads

    handler = {"model_name": "m", "decode_threads": 1, "top_k": 5}
    info = read_mar(make_mar("ours.mar", {"batchSize": 4, "handler": handler}, toolkit=True))
    assert info.decode_threads == 1
    assert read_mar(make_mar("stock.mar", {"batchSize": 4})).decode_threads is None
    settings = with_decode_threads(info, {**SETTINGS, "decodeThreads": 2})
    out = read_mar(repackage(info, tmp_path / "out.mar", settings))
    assert out.config["handler"] == {**handler, "decode_threads": 2} and out.decode_threads == 2
    assert "decodeThreads" not in out.config and out.entry == SETTINGS
    auto = read_mar(make_mar("auto.mar", {"handler": {**handler, "decode_threads": "auto"}}, toolkit=True))
    assert auto.decode_threads == "auto"  # packaged auto: the tuner searches the pool too
    wrong = read_mar(make_mar("wrong.mar", {"handler": {**handler, "decode_threads": "x"}}, toolkit=True))
    assert wrong.decode_threads is None
