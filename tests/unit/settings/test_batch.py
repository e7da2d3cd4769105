"""The one batch-settings value: read from a models= entry, a describe answer and a tuner
point, written back as a models= entry, and a key left out taking TorchServe's default."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_layout import import_graph
from tsbatch.config.properties import model_settings, read_properties, update_model_settings
from tsbatch.kinds.image.kind import DECODE_KEYS
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.settings.batch import (
    DEFAULT_JOB_QUEUE_SIZE,
    SERVE_TIME_WORKERS,
    SHARED_WORKER_KEYS,
    TUNED_KEYS,
    BatchSettings,
    SettingsError,
    defaults_for,
)

FULL = {"minWorkers": 1, "maxWorkers": 1, "batchSize": 8, "maxBatchDelay": 5, "responseTimeout": 60}


def configured(
    entry: dict[str, object], keys: tuple = (), properties: dict[str, str] | None = None
) -> BatchSettings:
    return BatchSettings.configured(properties or {}, "m", entry, keys)


def test_an_entry_becomes_whole_numbers_with_the_worker_keys_of_its_kind() -> None:
    settings = configured({**FULL, "torchThreads": 2})
    assert (settings.batch_size, settings.max_batch_delay_ms, settings.min_workers, settings.max_workers) == (
        8,
        5,
        1,
        1,
    )
    assert (settings.response_timeout_s, settings.torch_threads, settings.job_queue_size) == (60, 2, None)
    assert configured(FULL).torch_threads == 1  # the handler's default
    decoding = {**FULL, "torchThreads": 1, "decodeThreads": 2, "decodePath": "tensor"}
    assert configured(decoding, DECODE_KEYS).entry() == decoding
    assert configured(decoding, DECODE_KEYS).worker_key("decodeThreads") == 2
    assert configured({**FULL, "torchThreads": 2}, DECODE_KEYS).worker_key("decodeThreads") is None
    assert configured(decoding).worker == (), "a kind without the key does not read it"
    serving = {**FULL, "torchThreads": 1, "jobQueueSize": 12, "deadlineBudgetMs": 500}
    assert configured(serving, SHARED_WORKER_KEYS).entry() == serving


@pytest.mark.parametrize(
    ("entry", "keys", "message"),
    [
        ({**FULL, "batchSize": "8"}, (), r"models\.m: \['batchSize'\] must be whole numbers"),
        ({**FULL, "responseTimeout": True}, (), r"\['responseTimeout'\] must be whole numbers"),
        ({**FULL, "decodePath": "fast"}, DECODE_KEYS, "models.m.decodePath: must be one of auto, pil, tensor"),
        ({**FULL, "jobQueueSize": 0}, (), "models.m.jobQueueSize: must be a whole number of at least 1"),
        ({**FULL, "deadlineBudgetMs": -1}, SHARED_WORKER_KEYS, "deadlineBudgetMs: must be a whole number of at least 0"),
    ],
)  # fmt: skip
def test_an_entry_the_toolkit_cannot_serve_is_refused_by_name(entry: dict, keys: tuple, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        configured(entry, keys)


def test_a_key_left_out_takes_what_torchserve_0_12_would_serve() -> None:
    bare = configured({"marName": "m.mar"})
    assert bare.entry() == {"batchSize": 1, "maxBatchDelay": 100, "responseTimeout": 120, "torchThreads": 1}
    said = {d.key: d.describe() for d in defaults_for({}, {})}
    assert said["responseTimeout"] == "responseTimeout left out: 120 baked into the archive (TorchServe's default; no default_response_timeout)"  # fmt: skip
    assert said["minWorkers"] == f"minWorkers left out: not baked ({SERVE_TIME_WORKERS})"
    server_wide = {"default_response_timeout": "30", "default_workers_per_model": "2"}
    assert configured({}, properties=server_wide).entry() == {
        "batchSize": 1, "maxBatchDelay": 100, "minWorkers": 2, "maxWorkers": 2, "responseTimeout": 30, "torchThreads": 1,
    }  # fmt: skip
    assert [d.source for d in defaults_for(server_wide, {})][:2] == ["default_workers_per_model"] * 2
    # A key set is never defaulted, whatever the server-wide values.
    assert configured({"responseTimeout": 9}, properties=server_wide).response_timeout_s == 9
    assert configured({}) == configured({}).changed() == BatchSettings(1, 100, None, None, 120, 1)


def test_a_model_s_queue_is_its_own_size_else_the_server_s_else_torchserve_s_default() -> None:
    assert configured({"jobQueueSize": 12}).queue_size({"job_queue_size": "64"}) == 12
    assert configured({}).queue_size({"job_queue_size": "64"}) == 64
    assert configured({}).queue_size({}) == DEFAULT_JOB_QUEUE_SIZE == 100


def test_a_describe_answer_is_read_into_the_same_value() -> None:
    answer = {"modelVersion": "1.0", "batchSize": 8, "maxBatchDelay": 10, "minWorkers": 1, "maxWorkers": 2,
              "responseTimeout": 120, "workers": [{"id": "9000", "status": "READY"}]}  # fmt: skip
    served = BatchSettings.described(answer)
    assert served == BatchSettings(8, 10, 1, 2, 120)
    assert served.key == (8, 10, 1) and served.workers == 1
    assert served.label() == "batchSize=8, maxBatchDelay=10 ms, workers=1"
    without_timeout = {key: value for key, value in answer.items() if key != "responseTimeout"}
    assert BatchSettings.described(without_timeout).response_timeout_s is None


def test_a_tuner_point_is_one_worker_count_and_the_worker_keys_it_sets() -> None:
    point = BatchSettings.for_point(16, 20, 2, decodeThreads=None)
    assert point.entry() == {"batchSize": 16, "maxBatchDelay": 20, "minWorkers": 2, "maxWorkers": 2}
    assert point.worker == ()
    pooled = BatchSettings.for_point(16, 20, 2, decodeThreads="auto")
    assert pooled.entry() == {**point.entry(), "decodeThreads": "auto"} and pooled.key == point.key
    assert pooled.with_worker(decodePath="pil", decodeThreads=4).worker == (
        ("decodeThreads", 4),
        ("decodePath", "pil"),
    )


def test_changes_keep_what_they_do_not_name() -> None:
    served = BatchSettings(8, 10, 1, 2, 60, 3, 12, (("decodeThreads", 2),))
    assert served.changed(batch_size=16) == BatchSettings(16, 10, 1, 2, 60, 3, 12, (("decodeThreads", 2),))
    assert served.changed(workers=4).key == (8, 10, 4) and served.changed(workers=4).max_workers == 4
    assert served.changed() == served
    assert served.entry(TUNED_KEYS) == {"batchSize": 8, "maxBatchDelay": 10, "minWorkers": 1, "maxWorkers": 2}


def test_settings_torchserve_cannot_serve_say_why() -> None:
    served = BatchSettings.for_point(8, 10, 1)
    assert served.problem() is None
    assert served.changed(batch_size=0).problem() == "batchSize must be at least 1, got 0"
    assert served.changed(max_batch_delay_ms=-1).problem() == "maxBatchDelay must be 0 ms or more, got -1"
    assert "0 would stop serving" in str(served.changed(workers=0).problem())


def test_settings_written_back_land_in_config_properties_with_comments_kept(tmp_path: Path) -> None:
    properties = tmp_path / "config.properties"
    properties.write_text(DEFAULT_PROPERTIES.read_text())
    update_model_settings(properties, "resnet18", BatchSettings.for_point(16, 20, 2).entry())
    entry = model_settings(read_properties(properties))["resnet18"]
    assert (entry["batchSize"], entry["maxBatchDelay"], entry["minWorkers"], entry["maxWorkers"]) == (
        16,
        20,
        2,
        2,
    )
    assert entry["torchThreads"] == 1, "the other settings stay"
    comments = [line for line in DEFAULT_PROPERTIES.read_text().splitlines() if line.startswith("#")]
    assert comments == [line for line in properties.read_text().splitlines() if line.startswith("#")]
    read_back = BatchSettings.configured(read_properties(properties), "resnet18", entry)
    assert read_back.key == (16, 20, 2)


def test_the_value_imports_nothing_of_the_toolkit() -> None:
    """A leaf: the server, the SLA figures, the config checks and the tuner all import it."""
    assert not {name for name in import_graph()["tsbatch.settings.batch"] if name.startswith("tsbatch")}
