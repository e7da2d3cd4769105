"""Typed per-model configuration, read from the archive's ``model-config.yaml``.

The build writes one ``handler:`` section per model (see ``tsbatch/archive/package.py``); the
handler reads it back through :func:`from_mapping`, which rejects unknown or missing keys
so that a typo in a manifest fails at load time instead of silently using a default.
The defaults here are the only ones: ``models.yaml``'s keys for the handler are generated
from these fields (``tsbatch.archive.schema.handler_model``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar


@dataclass(frozen=True, kw_only=True)
class BuildTimings:
    """How long each gated candidate took per batch on the build CPU (best of several
    runs, one thread): timings say something only on a CPU of the same model."""

    cpu_model: str = ""
    batch_size: int = 0
    ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """What every handler reads, whatever its model: the files to load, how many answers
    to give, and how its worker runs (threads, warm-up batch sizes)."""

    model_name: str
    # The fp32 TorchScript file; "" where the archive has none (an exported program that
    # does not trace into one: its packages serve alone, batchkit.planner).
    model_file: str
    labels_file: str
    top_k: int = 5
    torch_threads: int = 1
    warmup_batch_sizes: tuple[int, ...] = (1,)
    # Most inputs one request may carry (a list, KServe instances/inputs); more get 413.
    max_inputs_per_request: int = 64
    # The deadline of a request that sends none: its proxy's arrival stamp (X-Request-Start)
    # plus this many ms; 0 = none (batchkit.deadlines). From the model's deadlineBudgetMs.
    deadline_budget_ms: int = 0
    # How the worker computes (batchkit.planner decides): auto picks by the build's timings
    # or the hardware; compiled_models are the .pt2 packages that passed the build gates,
    # exported for batches up to compiled_max_batch_size; failed_gates names candidates
    # never served. Candidate keys are batchkit.candidates.ServingCandidate names/files.
    precision: str = "auto"
    runtime: str = "auto"
    compiled_models: tuple[str, ...] = ()
    compiled_max_batch_size: int = 0
    failed_gates: tuple[str, ...] = ()
    # The build's record, which the worker trusts instead of judging accuracy again: each
    # gated candidate's class probabilities on the fixed check inputs (keyed like
    # "aoti-cpu-bf16", "torchscript-fp32").
    check_outputs: dict[str, list[list[float]]] = field(default_factory=dict)
    # The build CPU's features that compiled code may use: a CPU package runs only where
    # all of them are present (an AMX package dies of SIGILL on an AVX2-only CPU).
    compiled_cpu_flags: tuple[str, ...] = ()
    # Each gated CPU candidate's time per batch on the build CPU: ``auto`` serves the
    # fastest on a CPU of the same model.
    timings_ms: BuildTimings = field(default_factory=BuildTimings)


ConfigT = TypeVar("ConfigT", bound=ModelConfig)
SectionT = TypeVar("SectionT")


def from_mapping(config_type: type[SectionT], values: Mapping[str, Any]) -> SectionT:
    """Build a config dataclass from a plain mapping, with clear errors for bad keys."""
    fields = {f.name: f for f in dataclasses.fields(config_type)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{config_type.__name__}: unknown keys {unknown}")
    required = [
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = sorted(set(required) - set(values))
    if missing:
        raise ValueError(f"{config_type.__name__}: missing keys {missing}")
    converted: dict[str, Any] = {name: _field_value(fields[name], value) for name, value in values.items()}
    return config_type(**converted)


def _field_value(spec: dataclasses.Field[Any], value: Any) -> Any:
    """Lists become tuples; a mapping for a nested config section becomes that section."""
    if isinstance(value, list):
        return tuple(value)
    factory = spec.default_factory
    if isinstance(value, Mapping) and factory is not dataclasses.MISSING:
        section = factory()
        if dataclasses.is_dataclass(section) and not isinstance(section, type):
            return from_mapping(type(section), value)
    return value


def to_mapping(config: ModelConfig) -> dict[str, Any]:
    """The inverse of :func:`from_mapping`, with tuples as lists so YAML stays plain."""
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in dataclasses.asdict(config).items()
    }
