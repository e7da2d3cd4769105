"""The manifest's handler keys are generated from the worker's own config type
(batchkit.config, no pydantic inside the worker): one name, one type, one default."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

import pytest

from tsbatch.archive.kind import installed_kinds
from tsbatch.archive.schema import Common, handler_model, handler_values
from tsbatch.kinds.image.schema import ImageModel
from tsbatch.kinds.text.schema import TextModel


@dataclass(frozen=True, kw_only=True)
class Config:
    top_k: int = 5
    warmup_batch_sizes: tuple[int, ...] = (1,)
    max_inputs_per_request: int = 8
    max_body_bytes: int = 100
    precision: str = "auto"
    runtime: str = "auto"
    size: int = 3
    threshold: float


class Entry(Common):
    """A test kind."""


def test_a_key_the_worker_lacks_fails_at_import() -> None:
    with pytest.raises(TypeError, match=r"Config has no field \['sise'\]"):
        handler_model("Renamed", Entry, Config, {"sise": int})
    with pytest.raises(TypeError, match=r"Config\.threshold has no default"):
        handler_model("NoDefault", Entry, Config, {"threshold": float})


def test_generated_keys_take_the_worker_s_defaults_and_the_manifest_s_ranges() -> None:
    model = handler_model("Generated", Entry, Config, {"size": typing.Annotated[int, "x"]})
    entry = model.model_validate({"handler": "h", "version": 1})
    assert (entry.size, entry.max_inputs_per_request, entry.version) == (3, 8, "1")
    assert handler_values(entry) == {
        "top_k": 5,
        "warmup_batch_sizes": (1,),
        "max_inputs_per_request": 8,
        "max_body_bytes": 100,
        "precision": "auto",
        "runtime": "auto",
        "size": 3,
    }
    with pytest.raises(ValueError, match="greater than 0"):
        model.model_validate({"handler": "h", "version": "1", "top_k": 0})


@pytest.mark.parametrize("kind", list(installed_kinds().values()), ids=list(installed_kinds()))
def test_every_handler_key_is_a_worker_field_with_its_default(kind: typing.Any) -> None:
    fields = {field.name: field for field in dataclasses.fields(kind.config)}
    assert {
        "top_k",
        "max_body_bytes",
        "max_inputs_per_request",
        "precision",
        "runtime",
    } <= kind.entry.handler_keys
    for key in kind.entry.handler_keys:
        assert key in fields, key
        assert kind.entry.model_fields[key].default == fields[key].default, key


@pytest.mark.parametrize("kind", list(installed_kinds().values()), ids=list(installed_kinds()))
def test_what_the_manifest_accepts_the_handler_loads(kind: typing.Any) -> None:
    hints = typing.get_type_hints(kind.config)
    entry = kind.entry.model_validate({"kind": kind.name, "handler": "h", "version": "1"})
    for key, value in handler_values(entry).items():
        expected = typing.get_origin(hints[key]) or hints[key]
        assert isinstance(value, expected), (key, value, hints[key])


def test_precision_choices_match_the_worker() -> None:
    from batchkit.candidates import PRECISIONS

    choices = set(typing.get_args(ImageModel.model_fields["precision"].annotation))
    assert choices == {"auto", *PRECISIONS}


def test_the_archive_carries_the_handler_keys_only() -> None:
    text = TextModel.model_validate({"kind": "text", "handler": "h", "version": "1", "max_length": 32})
    values = handler_values(text)
    assert values["max_length"] == 32 and values["pass_overhead_tokens"] == 0 and "base_model" not in values
    image = ImageModel.model_validate({"kind": "image", "handler": "h", "version": "1", "optimize": False})
    assert {"weights", "kind", "verify"}.isdisjoint(handler_values(image))
    assert handler_values(image)["optimize"] is False
