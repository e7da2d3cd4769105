"""Run settings from Locust's parsed options, kept free of Locust imports so they unit-test cleanly
(importing locust monkey-patches the whole process with gevent)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsbatch.locust.shapes import ShapeParams
from tsbatch.sla.profiles import Sla, SlaError, load_profile

DEFAULT_MIX = "resnet18=1,bert_intent=1"


def parse_mix(text: str) -> dict[str, float]:
    """``"resnet18=3,bert_intent=1"`` -> weights; a bare model name weighs 1; weight 0 drops it."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        try:
            value = float(weight) if weight.strip() else 1.0
        except ValueError as exc:
            raise ValueError(f"--mix: weight of {name.strip()!r} is not a number: {weight!r}") from exc
        if value < 0:
            raise ValueError(f"--mix: weight of {name.strip()!r} is negative")
        if value > 0:
            mix[name.strip()] = value
    if not mix:
        raise ValueError(f"--mix {text!r} selects no model")
    return mix


@dataclass(frozen=True)
class RunConfig:
    """What one test run is held to: the SLA of every model in the traffic mix."""

    mix: dict[str, float]
    slas: dict[str, Sla]

    @property
    def models(self) -> list[str]:
        return list(self.mix)


def run_config(options: Any) -> RunConfig:
    mix = parse_mix(options.mix)
    slas = load_profile(options.sla_profile or None, Path(options.sla_file))
    missing = [model for model in mix if model not in slas]
    if missing:
        profile = next(iter(slas.values())).profile if slas else options.sla_profile
        raise SlaError(f"no SLA for {missing} in profile {profile!r} of {options.sla_file}")
    return RunConfig(mix, slas)


def shape_params(options: Any) -> ShapeParams:
    return ShapeParams(
        kind=options.shape,
        users=int(options.num_users or 1),
        spawn_rate=float(options.spawn_rate or 1),
        run_time=float(options.run_time) if options.run_time else None,
        step_users=options.step_users,
        step_time=options.step_time,
        spike_users=options.spike_users,
        spike_at=options.spike_at,
        spike_time=options.spike_time,
    )
