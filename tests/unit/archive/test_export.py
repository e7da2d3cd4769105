"""`tsbatch export --model M`: the model's kind decides the options, another kind's option is refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.archive.export import main
from tsbatch.archive.manifest import load_manifest

MANIFEST = load_manifest()
IMAGE_MODEL = next(name for name, spec in MANIFEST.models.items() if spec.kind.name == "image")
TEXT_MODEL = next(name for name, spec in MANIFEST.models.items() if spec.kind.name == "text")


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_without_a_model_it_lists_the_models_and_their_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    error = refused([], capsys)
    assert "name the model to export with --model" in error
    assert f"{IMAGE_MODEL} (kind image)" in error and f"{TEXT_MODEL} (kind text)" in error


def test_help_without_a_model_shows_every_kind_with_its_models(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of([], capsys)
    assert f"options of kind image ({IMAGE_MODEL})" in text and f"options of kind text ({TEXT_MODEL})" in text
    assert "--labels LABELS" in text and "--oos-threshold OOS_THRESHOLD" in text
    assert "--kind" not in text  # the old names' helper stays out of sight


def test_help_of_a_model_shows_its_kind_options_only(capsys: pytest.CaptureFixture[str]) -> None:
    image = help_of(["--model", IMAGE_MODEL], capsys)
    assert "options of kind image" in image and "--labels" in image and "--oos-threshold" not in image
    text = help_of(["--model", TEXT_MODEL], capsys)
    assert "options of kind text" in text and "--oos-threshold" in text and "--labels" not in text


def test_an_option_of_another_kind_is_refused_naming_the_kind_that_takes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = refused(["--model", TEXT_MODEL, "--labels=labels.txt"], capsys)
    assert f"--labels is an option of kind image, and {TEXT_MODEL} is kind text" in error
    assert f"tsbatch export --model {TEXT_MODEL} --help" in error
    error = refused(["--model", IMAGE_MODEL, "--test", "t.csv"], capsys)
    assert f"--test is an option of kind text, and {IMAGE_MODEL} is kind image" in error
    assert "unrecognized arguments: --no-such-option" in refused(
        ["--model", IMAGE_MODEL, "--no-such-option"], capsys
    )


def test_kind_picks_its_first_model_and_an_unknown_model_or_kind_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "--labels LABELS" in help_of(["--kind", "image"], capsys)
    assert "model 'no_such_model' is not in the manifest" in refused(["--model", "no_such_model"], capsys)
    assert "no kind 'audio' is installed" in refused(["--kind", "audio"], capsys)


def test_without_a_manifest_help_still_lists_every_kind_and_export_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside a checkout (an installed toolkit, no models.yaml here): help works, export explains."""
    missing = tmp_path / "models.yaml"
    text = help_of(["--manifest", str(missing)], capsys)
    assert "options of kind image" in text and "options of kind text" in text
    error = refused(["--manifest", str(missing), "--model", "resnet18"], capsys)
    assert f"cannot read {missing}: No such file or directory" in error
