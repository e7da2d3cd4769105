"""config.properties parsing and comment-preserving edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.config.properties import (
    PropertiesError,
    model_settings,
    parse_entries,
    read_properties,
    update_model_settings,
)
from tsbatch.paths import REPO_ROOT

SAMPLE = """# top comment
! bang comment
inference_address = http://127.0.0.1:8080
key\\ with\\ space: value
empty=
models={\\
    "m": {\\
        "1.0": {"defaultVersion": true, "batchSize": 4,\\
                "maxBatchDelay": 5}\\
    }\\
}
# trailing comment
tail=end
"""


def test_java_properties_rules() -> None:
    entries = {e.key: e for e in parse_entries(SAMPLE)}
    assert entries["inference_address"].value == "http://127.0.0.1:8080"
    assert entries["key with space"].value == "value"
    assert entries["empty"].value == ""
    assert entries["models"].first_line == 5 and entries["models"].last_line == 10
    assert entries["tail"].value == "end"


def test_model_settings_reads_the_default_version(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text(SAMPLE)
    assert model_settings(read_properties(path)) == {
        "m": {"defaultVersion": True, "batchSize": 4, "maxBatchDelay": 5}
    }


def test_broken_models_json_says_where(tmp_path: Path) -> None:
    with pytest.raises(PropertiesError, match="not valid JSON"):
        model_settings({"models": '{"m": {"1.0": {"batchSize": 4,}}}'})


def test_update_keeps_comments_and_other_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text(SAMPLE)
    update_model_settings(path, "m", {"batchSize": 16, "maxBatchDelay": 20})
    text = path.read_text()
    assert text.startswith("# top comment\n! bang comment\n")
    assert "# trailing comment\ntail=end\n" in text
    settings = model_settings(read_properties(path))
    assert settings["m"]["batchSize"] == 16 and settings["m"]["maxBatchDelay"] == 20


def test_repository_config_is_readable_and_safe() -> None:
    values = read_properties(REPO_ROOT / "config.properties")
    assert values["inference_address"].startswith("http://127.0.0.1:")
    assert values["disable_token_authorization"] == "false"
    assert values["enable_model_api"] == "false"
    assert values["metrics_mode"] == "prometheus"
    assert set(model_settings(values)) == {"resnet18", "bert_intent"}


def test_load_models_is_read_as_torchserve_reads_it() -> None:
    from tsbatch.config.properties import load_models

    assert load_models({"load_models": " resnet18.mar, bert_intent ,"}) == ["resnet18", "bert_intent"]
    assert load_models({"load_models": "ALL"}) is None
    assert load_models({}) == [] and load_models({"load_models": " "}) == []


def test_model_settings_edits_and_reads_the_default_version() -> None:
    from tsbatch.config.properties import model_settings, parse_entries, with_model_settings

    text = 'models={"m": {"0.9": {"batchSize": 1}, "1.0": {"defaultVersion": true, "batchSize": 2}}}\n'
    edited = with_model_settings(text, {"m": {"batchSize": 16}, "new": {"batchSize": 4}})
    values = {entry.key: entry.value for entry in parse_entries(edited)}
    settings = model_settings(values)
    assert settings["m"]["batchSize"] == 16 and settings["new"] == {
        "defaultVersion": True,
        "marName": "new.mar",
        "batchSize": 4,
    }
    assert '"0.9": {\\\n' in edited and '"batchSize": 1' in edited  # the other version untouched


def test_a_model_s_configured_settings_come_from_its_entry() -> None:
    import json

    from tsbatch.config.properties import configured_settings

    values = {"models": json.dumps({"m": {"1.0": {"batchSize": 8, "torchThreads": 2}}})}
    assert configured_settings(values, "m").key == (8, 100, None)
    assert configured_settings(values, "m").torch_threads == 2
    with pytest.raises(PropertiesError, match="no models entry for 'x'"):
        configured_settings(values, "x")
