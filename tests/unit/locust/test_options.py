"""The load test's options: the traffic mix and the SLA of every model in it."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tsbatch.kinds.lookup import UnknownModel
from tsbatch.locust.options import (
    add_options,
    default_mix,
    parse_mix,
    run_config,
    server_endpoints,
    server_view_refusal,
)
from tsbatch.paths import DEFAULT_SLA_FILE
from tsbatch.sla.profiles import SlaError


def test_parse_mix() -> None:
    assert parse_mix("resnet18=3, bert_intent=1") == {"resnet18": 3.0, "bert_intent": 1.0}
    assert parse_mix("resnet18") == {"resnet18": 1.0}
    assert parse_mix("resnet18=1,bert_intent=0") == {"resnet18": 1.0}
    for bad in ("", "resnet18=0", "resnet18=x", "resnet18=-1"):
        with pytest.raises(ValueError):
            parse_mix(bad)


def test_run_config_needs_an_sla_for_every_model_in_the_mix(tmp_path: Path) -> None:
    options = SimpleNamespace(
        mix="resnet18=1,bert_intent=1", sla_profile="cpu", sla_file=str(DEFAULT_SLA_FILE)
    )
    config = run_config(options)
    assert config.models == ["resnet18", "bert_intent"] and config.slas["resnet18"].profile == "cpu"
    with pytest.raises(SlaError):
        run_config(SimpleNamespace(mix="resnet50=1", sla_profile="cpu", sla_file=str(DEFAULT_SLA_FILE)))
    with pytest.raises(SlaError):
        run_config(SimpleNamespace(mix="resnet18=1", sla_profile="nope", sla_file=str(DEFAULT_SLA_FILE)))


def test_the_default_mix_is_every_manifest_model_and_a_model_needs_a_kind(tmp_path: Path) -> None:
    assert default_mix() == "resnet18=1,bert_intent=1"
    sla_file = tmp_path / "sla.yaml"
    sla_file.write_text(DEFAULT_SLA_FILE.read_text().replace("resnet18:", "foreign:"))
    with pytest.raises(UnknownModel, match=r"'foreign' is not in models\.yaml.*--requests"):
        run_config(SimpleNamespace(mix="foreign=1", sla_profile="cpu", sla_file=str(sla_file)))


class LocustLikeParser(argparse.ArgumentParser):
    """Locust's parser takes ``include_in_web_ui``; plain argparse does not."""

    def add_argument(self, *args: Any, include_in_web_ui: bool = True, **kwargs: Any) -> Any:
        return super().add_argument(*args, **kwargs)


def test_option_defaults_make_a_usable_run_config() -> None:
    parser = LocustLikeParser()
    add_options(parser)
    options = parser.parse_args([])
    assert (options.mix, options.mode, options.shape) == (default_mix(), "closed", "steady")
    assert Path(options.sla_file) == DEFAULT_SLA_FILE
    assert set(run_config(options).models) == {"resnet18", "bert_intent"}
    opened = parser.parse_args(["--mode", "open", "--user-rate", "5", "--shape", "spike"])
    assert (opened.mode, opened.user_rate, opened.shape) == ("open", 5.0, "spike")
    with pytest.raises(SystemExit):
        parser.parse_args(["--shape", "ramp"])


def test_server_endpoints_default_to_config_properties_and_take_the_management_key(tmp_path: Path) -> None:
    properties = tmp_path / "config.properties"
    properties.write_text("metrics_address=http://127.0.0.1:9182\nmanagement_address=http://127.0.0.1:9181\n")
    key_file = tmp_path / "key_file.json"
    key_file.write_text('{"management": {"key": "m-key"}, "inference": {"key": "i-key"}}')
    options = SimpleNamespace(metrics_url="", management_url="", key_file=str(key_file))
    endpoints = server_endpoints(options, properties)
    assert (endpoints.metrics_url, endpoints.management_url) == (
        "http://127.0.0.1:9182",
        "http://127.0.0.1:9181",
    )
    assert endpoints.management_token == "m-key"
    given = SimpleNamespace(
        metrics_url="http://m:1", management_url="http://g:2", key_file=str(tmp_path / "none")
    )
    chosen = server_endpoints(given, tmp_path / "missing.properties")
    assert (chosen.metrics_url, chosen.management_url, chosen.management_token) == (
        "http://m:1",
        "http://g:2",
        None,
    )
    assert "no key file" in chosen.token_source


def test_the_server_view_refuses_config_addresses_for_another_host(tmp_path: Path) -> None:
    properties = tmp_path / "config.properties"
    properties.write_text("inference_address=http://127.0.0.1:8080\n")
    default = SimpleNamespace(metrics_url="")
    assert server_view_refusal(default, "http://127.0.0.1:8080/", properties) is None
    assert server_view_refusal(default, None, properties) is None
    refusal = server_view_refusal(default, "http://torchserve.internal:8080", properties)
    assert refusal is not None and "give --metrics-url" in refusal
    given = SimpleNamespace(metrics_url="http://torchserve.internal:8082")
    assert server_view_refusal(given, "http://torchserve.internal:8080", properties) is None
