"""The load test's options: the traffic mix and the SLA of every model in it."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

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


def test_the_default_mix_is_every_manifest_model() -> None:
    assert default_mix() == "resnet18=1,bert_intent=1"


class LocustLikeParser(argparse.ArgumentParser):
    """Locust's parser takes ``include_in_web_ui``; plain argparse does not."""

    def add_argument(self, *args: Any, include_in_web_ui: bool = True, **kwargs: Any) -> Any:
        return super().add_argument(*args, **kwargs)


def parse(*argv: str) -> argparse.Namespace:
    parser = LocustLikeParser()
    add_options(parser)
    return parser.parse_args(list(argv))


def test_run_config_needs_an_sla_for_every_model_in_the_mix() -> None:
    config = run_config(parse("--mix", "resnet18=1,bert_intent=1", "--sla-profile", "cpu"))
    assert config.models == ["resnet18", "bert_intent"] and config.slas["resnet18"].profile == "cpu"
    with pytest.raises(SlaError, match="--p99-ms"):
        run_config(parse("--model", "resnet50", "--requests", "pics"))
    with pytest.raises(SlaError):
        run_config(parse("--mix", "resnet18=1", "--sla-profile", "nope"))


def test_a_model_outside_the_manifest_needs_its_requests_and_takes_command_line_targets() -> None:
    with pytest.raises(ValueError, match=r"no requests for \['mobilenet'\]: .* --requests MODEL=PATH"):
        run_config(parse("--model", "mobilenet", "--p99-ms", "500"))
    config = run_config(parse("--model", "mobilenet", "--requests", "pics", "--p99-ms", "500"))
    assert config.mix == {"mobilenet": 1.0} and config.requests == {"mobilenet": Path("pics")}
    sla = config.slas["mobilenet"]
    assert (sla.p99_ms, sla.max_error_rate, sla.profile) == (500.0, 0.01, "command line")
    # several models: MODEL=PATH each, the toolkit's own beside them keeping its pool and SLA
    mixed = run_config(
        parse("--mix", "mobilenet=1,resnet18=1", "--requests", "mobilenet=pics", "--p50-ms", "900",
              "--answer-schema", "answer.json")
    )  # fmt: skip
    assert mixed.requests == {"mobilenet": Path("pics")} and mixed.answer_schema == "answer.json"
    assert (
        mixed.slas["resnet18"].p50_ms == 900 and mixed.slas["resnet18"].p99_ms == 1000
    )  # the file's cpu p99
    with pytest.raises(ValueError, match="leaves out"):
        run_config(parse("--model", "resnet18", "--requests", "other=pics"))
    with pytest.raises(ValueError, match="not both"):
        run_config(parse("--model", "resnet18", "--mix", "bert_intent=1"))


def test_command_line_targets_need_no_sla_file(tmp_path: Path) -> None:
    options = parse(
        "--model", "m", "--requests", "x", "--max-error-rate", "0", "--sla-file", str(tmp_path / "none")
    )
    assert run_config(options).slas["m"].max_error_rate == 0.0
    with pytest.raises(OSError):
        run_config(parse("--sla-file", str(tmp_path / "none")))


def test_option_defaults_make_a_usable_run_config() -> None:
    parser = LocustLikeParser()
    add_options(parser)
    options = parser.parse_args([])
    assert (options.mix, options.model, options.requests, options.mode) == ("", "", None, "closed")
    assert run_config(options).mix == parse_mix(default_mix())
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


def test_requests_carry_deadlines_unless_told_not_to() -> None:
    assert parse().no_deadlines is False and parse("--no-deadlines").no_deadlines is True
