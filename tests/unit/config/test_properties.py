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


def test_an_archive_entry_needs_every_baked_key_as_check_config_says() -> None:
    import json

    from tsbatch.config.properties import SHARED_WORKER_KEYS, PropertiesError, archive_entry
    from tsbatch.kinds.image.kind import DECODE_KEYS

    def models(entry: dict[str, int]) -> dict[str, str]:
        return {"models": json.dumps({"m": {"1.0": entry}})}

    full = {"minWorkers": 1, "maxWorkers": 1, "batchSize": 8, "maxBatchDelay": 5, "responseTimeout": 60}
    values = models({**full, "torchThreads": 2})
    assert archive_entry(values, "m")["torchThreads"] == 2
    assert archive_entry(models(full), "m")["torchThreads"] == 1  # the handler's default
    with pytest.raises(PropertiesError, match=r"\['batchSize'\] must be whole numbers"):
        archive_entry(models({**full, "batchSize": "8"}), "m")
    with pytest.raises(PropertiesError, match="no models entry for 'x'"):
        archive_entry(values, "x")
    decoding = models({**full, "torchThreads": 1, "decodeThreads": 2, "decodePath": "tensor"})
    assert archive_entry(decoding, "m", DECODE_KEYS) == {
        **full,
        "torchThreads": 1,
        "decodeThreads": 2,
        "decodePath": "tensor",
    }
    assert "decodeThreads" not in archive_entry(values, "m", DECODE_KEYS)
    assert "decodeThreads" not in archive_entry(decoding, "m")  # a kind without the key
    with pytest.raises(PropertiesError, match="decodePath: must be one of auto, pil, tensor"):
        archive_entry(models({**full, "torchThreads": 1, "decodePath": "fast"}), "m", DECODE_KEYS)
    serving = models({**full, "torchThreads": 1, "jobQueueSize": 12, "deadlineBudgetMs": 500})
    assert archive_entry(serving, "m", SHARED_WORKER_KEYS) == {
        **full,
        "torchThreads": 1,
        "jobQueueSize": 12,
        "deadlineBudgetMs": 500,
    }
    with pytest.raises(PropertiesError, match="jobQueueSize: must be a whole number of at least 1"):
        archive_entry(models({**full, "torchThreads": 1, "jobQueueSize": 0}), "m")
    with pytest.raises(PropertiesError, match="deadlineBudgetMs: must be a whole number of at least 0"):
        archive_entry(models({**full, "torchThreads": 1, "deadlineBudgetMs": -1}), "m", SHARED_WORKER_KEYS)


def test_a_model_s_queue_is_its_own_size_else_the_server_s_else_torchserve_s_default() -> None:
    from tsbatch.config.properties import DEFAULT_JOB_QUEUE_SIZE, queue_size

    assert queue_size({"job_queue_size": "64"}, {"jobQueueSize": 12}) == 12
    assert queue_size({"job_queue_size": "64"}, {}) == 64
    assert queue_size({}, {}) == DEFAULT_JOB_QUEUE_SIZE == 100


def test_a_key_left_out_takes_what_torchserve_0_12_would_serve() -> None:
    import json

    from tsbatch.config.properties import SERVE_TIME_WORKERS, archive_entry, defaults_for

    bare = {"models": json.dumps({"m": {"1.0": {"marName": "m.mar"}}})}
    assert archive_entry(bare, "m") == {"batchSize": 1, "maxBatchDelay": 100, "responseTimeout": 120, "torchThreads": 1}  # fmt: skip
    said = {d.key: d.describe() for d in defaults_for(bare, {})}
    assert said["responseTimeout"] == "responseTimeout left out: 120 baked into the archive (TorchServe's default; no default_response_timeout)"  # fmt: skip
    assert said["minWorkers"] == f"minWorkers left out: not baked ({SERVE_TIME_WORKERS})"
    server_wide = {**bare, "default_response_timeout": "30", "default_workers_per_model": "2"}
    assert archive_entry(server_wide, "m") == {
        "minWorkers": 2, "maxWorkers": 2, "batchSize": 1, "maxBatchDelay": 100, "responseTimeout": 30, "torchThreads": 1,
    }  # fmt: skip
    assert [d.source for d in defaults_for(server_wide, {})][:2] == ["default_workers_per_model"] * 2
    # A key set is never defaulted, whatever the server-wide values.
    assert archive_entry({**server_wide, "models": json.dumps({"m": {"1.0": {"responseTimeout": 9}}})}, "m")["responseTimeout"] == 9  # fmt: skip
