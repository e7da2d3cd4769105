"""SLA targets per model and profile, read from ``loadtest/sla.yaml``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
