"""The TorchServe process helpers: ports drawn for private instances, batch counters read from
/metrics while the frontend is still catching up."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.config.properties import read_properties
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import ServerError, TorchServe, absolute_log_config, effective_properties


def scrape(requests_: float, batches: float) -> str:
    return (
        "# TYPE BatchedRequestsTotal counter\n"
        f'BatchedRequestsTotal{{ModelName="resnet18",Level="Model",Hostname="h"}} {requests_}\n'
        f'BatchedRequestsTotal{{ModelName="other",Level="Model",Hostname="h"}} 99.0\n'
        f'BatchesTotal{{ModelName="resnet18",Level="Model",Hostname="h"}} {batches}\n'
    )


class ScriptedMetrics:
    """A client whose /metrics answers come from a list, one per scrape."""

    def __init__(self, scrapes: list[str]) -> None:
        self.scrapes = scrapes
        self.calls = 0

    def metrics_text(self) -> str:
        text = self.scrapes[min(self.calls, len(self.scrapes) - 1)]
        self.calls += 1
        return text


class ScriptedServer(TorchServe):
    """A TorchServe whose client is :class:`ScriptedMetrics`."""

    def __init__(self, scrapes: list[str]) -> None:
        super().__init__(run_dir=Path("."), properties_path=Path("."), model_store=Path("."))
        self.metrics = ScriptedMetrics(scrapes)
        self.__dict__["client"] = self.metrics  # what the cached ``client`` property would hold


NAMES = ["BatchedRequestsTotal", "BatchesTotal"]


def test_counters_are_per_model_and_zero_when_absent() -> None:
    server = ScriptedServer([scrape(5, 2)])
    assert server.model_counters("resnet18", NAMES) == {"BatchedRequestsTotal": 5.0, "BatchesTotal": 2.0}
    assert server.model_counters("bert_intent", NAMES) == {"BatchedRequestsTotal": 0.0, "BatchesTotal": 0.0}


def test_settled_counters_wait_for_the_floor_and_for_quiet() -> None:
    # The burst's metric lines arrive late and in two parts; an early scrape would read 1.
    server = ScriptedServer([scrape(1, 1), scrape(1, 1), scrape(5, 2), scrape(9, 3), scrape(9, 3)])
    counters = server.settled_counters("resnet18", NAMES, at_least={"BatchedRequestsTotal": 9}, quiet_s=0.01)
    assert counters == {"BatchedRequestsTotal": 9.0, "BatchesTotal": 3.0}
    assert server.metrics.calls == 5


def test_settled_counters_give_up_at_the_deadline() -> None:
    server = ScriptedServer([scrape(1, 1)])
    counters = server.settled_counters(
        "resnet18", NAMES, at_least={"BatchedRequestsTotal": 9}, quiet_s=0.01, timeout=0.05
    )
    assert counters["BatchedRequestsTotal"] == 1.0


def test_an_instance_config_names_the_plugins_and_metrics_by_absolute_paths(tmp_path: Path) -> None:
    source = tmp_path / "repo" / "config.properties"
    source.parent.mkdir()
    source.write_text("model_store=model-store\nmetrics_config=metrics.yaml\nplugins_path=build/plugins\n")
    written = read_properties(effective_properties(source, tmp_path / "run", tmp_path / "store"))
    assert written["plugins_path"] == str((source.parent / "build" / "plugins").resolve())
    assert written["metrics_config"] == str((source.parent / "metrics.yaml").resolve())


def test_a_relative_log_config_is_found_beside_the_config_else_the_toolkits(tmp_path: Path) -> None:
    """A config copied elsewhere still names the shipped log4j2.xml; one found nowhere is refused
    (log4j2 would silently log to the console only)."""
    flag = "-Dlog4j.configurationFile="
    assert (
        absolute_log_config(f"-Xmx1g {flag}log4j2.xml", tmp_path)
        == f"-Xmx1g {flag}{REPO_ROOT / 'log4j2.xml'}"
    )
    (tmp_path / "log4j2.xml").write_text("<Configuration/>")
    assert absolute_log_config(f"{flag}log4j2.xml", tmp_path) == f"{flag}{tmp_path / 'log4j2.xml'}"
    with pytest.raises(ServerError, match="found neither"):
        absolute_log_config(f"{flag}missing.xml", tmp_path)
