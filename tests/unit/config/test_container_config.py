"""The container config stays config.properties with container addresses, and the probe's
offline parts (properties reading, address mapping, key expiry) behave."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deploy.probe import Client, ProbeFailed, local_url
from deploy.probe import main as probe_main
from tsbatch.config import container_config
from tsbatch.config.properties import model_settings, parse_entries, read_properties
from tsbatch.environment import DRAIN_FILE_ENV, DRAIN_SECONDS_ENV
from tsbatch.paths import DEFAULT_PROPERTIES


def test_committed_container_configs_are_current() -> None:
    for derived in container_config.DERIVED_CONFIGS:
        assert derived.path.read_text() == derived.render(DEFAULT_PROPERTIES.read_text()), (
            f"{derived.path.name} is stale: run `python -m deploy.container_config`"
        )
    assert container_config.main(["--check"]) == 0


def test_cluster_config_is_the_container_config_with_token_auth_off() -> None:
    container, cluster = (
        read_properties(p.path) for p in (container_config.CONTAINER, container_config.CLUSTER)
    )
    changed = {key for key in container.keys() | cluster.keys() if container.get(key) != cluster.get(key)}
    assert changed == {"disable_token_authorization"}
    assert cluster["disable_token_authorization"] == "true"
    header = container_config.CLUSTER.path.read_text().split("\n\n", 1)[0]
    assert "NetworkPolicy" in header and "docs/production.md" in header, "say why and what guards it"


def test_container_config_keeps_every_setting_but_addresses_and_paths() -> None:
    source, container = read_properties(DEFAULT_PROPERTIES), read_properties(container_config.CONTAINER.path)
    assert model_settings(container) == model_settings(source), "models= must be identical"
    changed = {key for key in source.keys() | container.keys() if source.get(key) != container.get(key)}
    assert changed == set(container_config.CONTAINER_ENTRIES)
    for key in ("inference_address", "management_address", "metrics_address"):
        assert container[key].startswith("http://0.0.0.0:")
        assert container[key].rsplit(":", 1)[1] == source[key].rsplit(":", 1)[1], "same ports"
    assert container["disable_token_authorization"] == "false", "token auth stays on in the image"
    assert container["load_models"] == source["load_models"]


def test_render_follows_a_changed_source() -> None:
    text = DEFAULT_PROPERTIES.read_text().replace("job_queue_size=64", "job_queue_size=7")
    rendered = read_properties_text(container_config.CONTAINER.render(text))
    assert rendered["job_queue_size"] == "7"
    assert rendered["inference_address"] == "http://0.0.0.0:8080"


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    assert container_config.main(["--output-dir", str(tmp_path)]) == 0
    assert container_config.main(["--check", "--output-dir", str(tmp_path)]) == 0
    (tmp_path / container_config.CLUSTER.path.name).write_text("inference_address=http://127.0.0.1:8080\n")
    assert container_config.main(["--check", "--output-dir", str(tmp_path)]) == 1


def read_properties_text(text: str) -> dict[str, str]:
    return {entry.key: entry.value for entry in parse_entries(text)}


# ---------------------------------------------------------------- probe, offline parts
def test_probe_reaches_wildcard_binds_on_loopback() -> None:
    assert local_url("http://0.0.0.0:8081/") == "http://127.0.0.1:8081"
    assert local_url("http://127.0.0.1:9000") == "http://127.0.0.1:9000"


def test_probe_knows_the_models_to_wait_for_and_when_a_key_expired(tmp_path: Path) -> None:
    key_file = tmp_path / "key_file.json"
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat().replace("+00:00", "123Z")
    future = (datetime.now(UTC) + timedelta(minutes=30)).isoformat().replace("+00:00", "Z")
    key_file.write_text(
        json.dumps(
            {
                "management": {"key": "m", "expiration time": past},
                "inference": {"key": "i", "expiration time": future},
                "API": {"key": "a"},
            }
        )
    )
    client = Client(container_config.CONTAINER.path, key_file, timeout=1)
    assert client.models == [
        name.removesuffix(".mar")
        for name in read_properties(container_config.CONTAINER.path)["load_models"].split(",")
    ]
    keys = client.key_file
    assert keys.expired("management") and not keys.expired("inference") and not keys.expired("API")
    assert client.management == "http://127.0.0.1:8081"


def test_probe_drain_marks_the_pod_and_readiness_then_fails(tmp_path: Path, monkeypatch) -> None:
    """preStop's `probe.py drain`: the mark appears, the wait ends, and readiness fails
    before it asks the server anything (no server runs here)."""
    marker = tmp_path / "draining"
    monkeypatch.setenv(DRAIN_FILE_ENV, str(marker))
    monkeypatch.setenv(DRAIN_SECONDS_ENV, "0.2")
    assert probe_main(["drain"]) == 0 and marker.exists()
    assert (
        probe_main(
            ["ready", "--config", str(container_config.CONTAINER.path), "--key-file", str(tmp_path / "k")]
        )
        == 1
    )
    with pytest.raises(ProbeFailed, match=re.escape(f"draining ({marker} exists)")):
        Client(container_config.CONTAINER.path, tmp_path / "k", timeout=1).ready()


def test_the_image_loads_the_plugins_from_where_the_build_stage_puts_them() -> None:
    source, container = read_properties(DEFAULT_PROPERTIES), read_properties(container_config.CONTAINER.path)
    assert source["plugins_path"] == "build/plugins"
    assert container["plugins_path"] == f"{container_config.APP_DIR}/{source['plugins_path']}"
