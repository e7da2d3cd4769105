"""Which model a bench measures: --model when it is of the bench's kind, else the first of it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tsbatch.archive.manifest import ManifestError, load_manifest
from tsbatch.bench import intent, model_option, multi_input


def test_the_default_is_the_first_model_of_the_kind_and_a_named_one_must_be_of_it() -> None:
    manifest = load_manifest()
    assert model_option.chosen_model(None, "image", manifest) == "resnet18"
    assert model_option.chosen_model(None, "text", manifest) == "bert_intent"
    assert model_option.chosen_model("bert_intent", "text", manifest) == "bert_intent"
    with pytest.raises(ManifestError, match="of kind 'image'; this measures kind 'text'"):
        model_option.chosen_model("resnet18", "text", manifest)
    with pytest.raises(ManifestError, match=r"'nope' is not in models\.yaml"):
        model_option.chosen_model("nope", "image", manifest)
    with pytest.raises(ManifestError, match="no model of kind 'audio'"):
        model_option.chosen_model(None, "audio", manifest)


def test_the_script_form_prints_the_model_or_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    assert model_option.main(["text"]) == 0
    assert capsys.readouterr().out.strip() == "bert_intent"
    assert model_option.main(["image", "--model", "bert_intent"]) == 2
    assert "measures kind 'image'" in capsys.readouterr().err


@pytest.mark.parametrize("bench", [intent.main, multi_input.main])
def test_a_bench_refuses_a_model_of_another_kind_before_any_server(
    bench: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = "resnet18" if bench is intent.main else "bert_intent"
    with pytest.raises(SystemExit):
        bench(["--model", wrong])
    assert "this measures kind" in capsys.readouterr().err
