"""What every ``models.yaml`` entry shares: the strict sections, the common keys, and the
keys the handler reads, generated from the handler's own config type.

Each model kind declares its entry model in its folder (``tsbatch/kinds/<kind>/schema.py``)
with :func:`handler_model`: a key the worker reads is defined once, in ``batchkit.config``
(name, type, default); the manifest adds only its range, so the two cannot drift apart.

Every section refuses keys it does not know (``extra="forbid"``) and values of the wrong
type or range, so a typo such as ``max_lenght`` fails the build and ``make check-config``
instead of silently leaving the default in force. ``tsbatch.archive.manifest`` turns the
validation errors into messages naming the file, the model, the key and its likely
intended name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, create_model, field_validator

Precision = Literal["auto", "fp32", "bf16", "fp16", "int8"]
Runtime = Literal["auto", "aoti", "torchscript"]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class Section(BaseModel):
    """A strict, immutable section: unknown keys and wrong types are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class Verify(Section):
    """Scripted vs eager and batch vs single: the largest |difference| allowed."""

    atol: Annotated[float, Field(gt=0.0)] = 1e-4
    batch_sizes: tuple[PositiveInt, ...] = (1, 4, 8)


class Compile(Section):
    """AOTInductor packages and TorchScript autocast candidates; ``host``: what this machine
    serves. A kind may add its own keys in a subclass (the image kind's int8 calibration)."""

    targets: Literal["host"] | tuple[str, ...] = "host"
    max_batch_size: PositiveInt = 16
    torchscript_precisions: Literal["host"] | tuple[Literal["bf16", "fp16"], ...] = "host"
    enforce_gates: bool = True

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        for target in () if value == "host" else value:
            device, _, precision = target.partition("-")
            if device not in ("cpu", "cuda") or precision not in ("fp32", "bf16", "fp16", "int8"):
                raise ValueError(f"target {target!r} is not <cpu|cuda>-<fp32|bf16|fp16|int8>")
        return value


class Common(Section):
    """What every model kind has beside its handler's keys: the handler file, version, compile."""

    # The keys the handler config carries from the manifest (set by handler_model).
    handler_keys: ClassVar[frozenset[str]] = frozenset()

    handler: str
    version: str
    compile: Compile = Compile()

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int | float) else value


# The handler keys of every kind: the manifest's type and range of each batchkit.config field.
COMMON_HANDLER_KEYS: dict[str, Any] = {
    "top_k": PositiveInt,
    "warmup_batch_sizes": tuple[PositiveInt, ...],
    "max_inputs_per_request": PositiveInt,
    "max_body_bytes": PositiveInt,
    "precision": Precision,
    "runtime": Runtime,
}
# Keys the handler reads at serving time only: packaging copies them into the handler
# config, so changing one repackages (seconds) instead of exporting again.
SERVING_KEYS = ("max_inputs_per_request", "max_body_bytes")

EntryT = TypeVar("EntryT", bound=Common)


def _default(config_type: type, field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return Field(default_factory=field.default_factory)
    raise TypeError(f"{config_type.__name__}.{field.name} has no default for models.yaml to fall back on")


def handler_model(name: str, base: type[EntryT], config_type: type, keys: Mapping[str, Any]) -> type[EntryT]:
    """``base`` plus the handler config's fields named in ``keys`` (and the common ones): the
    type and range from ``keys``, the default from ``config_type``. A key the config type
    lacks is an error here, at import, not a value silently left out of the archive."""
    fields = {field.name: field for field in dataclasses.fields(config_type)}
    wanted = {**COMMON_HANDLER_KEYS, **keys}
    unknown = sorted(set(wanted) - set(fields))
    if unknown:
        raise TypeError(f"{config_type.__name__} has no field {unknown}: the handler would never read it")
    definitions: dict[str, Any] = {
        key: (annotation, _default(config_type, fields[key])) for key, annotation in wanted.items()
    }
    model = create_model(name, __base__=base, __module__=base.__module__, __doc__=base.__doc__, **definitions)
    model.handler_keys = frozenset(definitions)
    return model


def handler_values(entry: Common) -> dict[str, Any]:
    """The entry's values of the keys its handler config carries."""
    return entry.model_dump(include=set(type(entry).handler_keys))
