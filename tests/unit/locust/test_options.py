"""The load test's options: the traffic mix and the SLA of every model in it."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tsbatch.locust.options import DEFAULT_MIX, add_options, parse_mix, run_config
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


class LocustLikeParser(argparse.ArgumentParser):
    """Locust's parser takes ``include_in_web_ui``; plain argparse does not."""

    def add_argument(self, *args: Any, include_in_web_ui: bool = True, **kwargs: Any) -> Any:
        return super().add_argument(*args, **kwargs)


def test_option_defaults_make_a_usable_run_config() -> None:
    parser = LocustLikeParser()
    add_options(parser)
    options = parser.parse_args([])
    assert (options.mix, options.mode, options.shape) == (DEFAULT_MIX, "closed", "steady")
    assert Path(options.sla_file) == DEFAULT_SLA_FILE
    assert set(run_config(options).models) == {"resnet18", "bert_intent"}
    opened = parser.parse_args(["--mode", "open", "--user-rate", "5", "--shape", "spike"])
    assert (opened.mode, opened.user_rate, opened.shape) == ("open", 5.0, "spike")
    with pytest.raises(SystemExit):
        parser.parse_args(["--shape", "ramp"])
