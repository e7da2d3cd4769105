"""SLA targets per model and profile, read from ``loadtest/sla.yaml``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tsbatch.environment import Environment
from tsbatch.paths import DEFAULT_SLA_FILE
from tsbatch.sla.server import SERVER_TARGETS

FIELDS = ("p50_ms", "p95_ms", "p99_ms", "max_error_rate", "min_throughput_rps")
OPTIONAL_FIELDS = tuple(SERVER_TARGETS)  # on TorchServe's own figures; absent = not judged


class SlaError(ValueError):
    """The SLA file or the requested profile/model is not usable."""


@dataclass(frozen=True)
class Sla:
    """What one model must meet: latency ceilings, an error-rate ceiling, a throughput floor,
    and optionally targets on the server's figures (mean batch size, queue time, restarts)."""

    model: str
    profile: str
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_error_rate: float
    min_throughput_rps: float
    min_mean_batch_size: float | None = None
    max_queue_ms: float | None = None
    max_worker_restarts: float | None = None

    def deadline_ms(self, sent_at_s: float) -> float:
        """The deadline a request sent at ``sent_at_s`` (Unix seconds) carries: an answer
        later than the p99 target is of no use to this SLA, so the server may shed it."""
        return sent_at_s * 1000 + self.p99_ms

    @property
    def server_targets(self) -> dict[str, float]:
        """The optional server targets this profile sets."""
        targets = {name: getattr(self, name) for name in OPTIONAL_FIELDS}
        return {name: value for name, value in targets.items() if value is not None}


def load_profile(profile: str | None = None, path: Path = DEFAULT_SLA_FILE) -> dict[str, Sla]:
    """Every model's SLA in a profile (default: $SLA_PROFILE, then the file's default)."""
    document = yaml.safe_load(path.read_text())
    profiles = document.get("profiles") or {}
    name = profile or Environment.read().sla_profile or document.get("default_profile")
    if name not in profiles:
        raise SlaError(f"SLA profile {name!r} not in {path} (have {sorted(profiles)})")
    slas: dict[str, Sla] = {}
    for model, targets in profiles[name].items():
        missing = [f for f in FIELDS if f not in targets]
        unknown = sorted(set(targets) - set(FIELDS) - set(OPTIONAL_FIELDS))
        if missing or unknown:
            raise SlaError(f"{path}: {name}.{model}: missing {missing}, unknown {unknown}")
        values = {f: float(targets[f]) for f in (*FIELDS, *OPTIONAL_FIELDS) if f in targets}
        slas[model] = Sla(model=model, profile=name, **values)
    return slas


def load_sla(model: str, profile: str | None = None, path: Path = DEFAULT_SLA_FILE) -> Sla:
    slas = load_profile(profile, path)
    if model not in slas:
        raise SlaError(f"no SLA for model {model!r} in profile {next(iter(slas.values())).profile!r}")
    return slas[model]


# Targets given on the command line (load test and tuner): figure -> option.
TARGET_OPTIONS = {
    "p50_ms": "--p50-ms",
    "p95_ms": "--p95-ms",
    "p99_ms": "--p99-ms",
    "max_error_rate": "--max-error-rate",
    "min_throughput_rps": "--min-throughput-rps",
}
COMMAND_LINE_PROFILE = "command line"
# What a model without an SLA entry is held to on the figures the command line leaves out:
# no latency ceiling or throughput floor, and at most 1% failed requests.
UNSET_TARGETS = {
    "p50_ms": math.inf,
    "p95_ms": math.inf,
    "p99_ms": math.inf,
    "max_error_rate": 0.01,
    "min_throughput_rps": 0.0,
}


def option_targets(values: Mapping[str, object]) -> dict[str, float]:
    """The targets set on the command line (``values``: parsed options by figure name; ``None``
    or an empty web-UI field is unset)."""
    targets = {}
    for figure, option in TARGET_OPTIONS.items():
        value = values.get(figure)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        try:
            targets[figure] = float(value) if isinstance(value, int | float | str) else math.nan
        except ValueError:
            targets[figure] = math.nan
        if math.isnan(targets[figure]):
            raise SlaError(f"{option}: {value!r} is not a number")
        if targets[figure] < 0:
            raise SlaError(f"{option}: must not be negative")
    return targets


def with_targets(
    slas: Mapping[str, Sla], models: Iterable[str], targets: Mapping[str, float]
) -> dict[str, Sla]:
    """Each model's SLA with the command-line targets over the file's; a model without an
    entry gets the command-line targets and :data:`UNSET_TARGETS` (none without targets)."""
    result = dict(slas)
    for model in models:
        if model in slas:
            if targets:
                sla = slas[model]
                result[model] = replace(sla, profile=f"{sla.profile} + {COMMAND_LINE_PROFILE}", **targets)
        elif targets:
            values = {**UNSET_TARGETS, **targets}
            result[model] = Sla(model=model, profile=COMMAND_LINE_PROFILE, **values)
    return result


def add_target_options(parser: Any) -> None:
    """``--p50-ms`` ... on an argparse (or Locust) parser, over the SLA file's targets."""
    for figure, option in TARGET_OPTIONS.items():
        parser.add_argument(
            option, type=float, default=None, help=f"SLA target {figure}, over the SLA file's"
        )


def slas_for(
    models: Iterable[str], profile: str | None, path: Path, targets: Mapping[str, float]
) -> dict[str, Sla]:
    """Every model's SLA: the profile's entry with the command-line ``targets`` over it. With
    targets, a model needs no entry and the command line needs no SLA file."""
    names = list(models)
    try:
        slas = load_profile(profile, path)
    except (SlaError, OSError):
        if not targets:
            raise
        slas = {}
    slas = with_targets(slas, names, targets)
    missing = [model for model in names if model not in slas]
    if missing:
        raise SlaError(
            f"no SLA for {missing} in profile {profile or 'default'!r} of {path}: add an entry, "
            f"or give targets on the command line ({', '.join(TARGET_OPTIONS.values())})"
        )
    return {model: slas[model] for model in names}
