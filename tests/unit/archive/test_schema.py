"""The handler's own small config loader (batchkit.config, no pydantic inside the worker)
agrees with the toolkit's typed models.yaml for every field both carry."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from batchkit.config import ImageModelConfig, ModelConfig, TextModelConfig
from tsbatch.archive.schema import ImageModel, TextModel

PAIRS = [(ImageModelConfig, ImageModel), (TextModelConfig, TextModel)]
# Same name, another idea: the manifest says where to get weights, the archive which it got.
RECORDED_NOT_READ = {"weights"}


def shared_fields(handler: type[ModelConfig], toolkit: type[ImageModel] | type[TextModel]) -> list[str]:
    return sorted(
        {f.name for f in dataclasses.fields(handler)} & set(toolkit.model_fields) - RECORDED_NOT_READ
    )


@pytest.mark.parametrize(("handler", "toolkit"), PAIRS, ids=["image", "text"])
def test_shared_fields_have_the_same_defaults(handler: type[ModelConfig], toolkit: type) -> None:
    names = shared_fields(handler, toolkit)
    assert {"top_k", "max_body_bytes", "max_inputs_per_request", "precision", "runtime"} <= set(names)
    for field in dataclasses.fields(handler):
        if field.name in names and field.default is not dataclasses.MISSING:
            assert toolkit.model_fields[field.name].default == field.default, field.name


@pytest.mark.parametrize(("handler", "toolkit"), PAIRS, ids=["image", "text"])
def test_what_the_manifest_accepts_the_handler_loads(handler: type[ModelConfig], toolkit: type) -> None:
    hints = typing.get_type_hints(handler)
    entry = toolkit.model_validate(
        {"kind": toolkit.model_fields["kind"].annotation.__args__[0], "handler": "h", "version": "1"}
    )
    for name in shared_fields(handler, toolkit):
        value = getattr(entry, name)
        expected = typing.get_origin(hints[name]) or hints[name]
        assert isinstance(value, expected), (name, value, hints[name])


def test_precision_choices_match_the_worker() -> None:
    from batchkit.candidates import PRECISIONS

    choices = set(typing.get_args(ImageModel.model_fields["precision"].annotation))
    assert choices == {"auto", *PRECISIONS}


def test_the_archive_carries_the_manifest_fields_by_name() -> None:
    from tsbatch.archive.schema import handler_fields

    text = TextModel.model_validate({"kind": "text", "handler": "h", "version": "1", "max_length": 32})
    fields = handler_fields(text, TextModelConfig)
    assert fields["max_length"] == 32 and fields["pass_overhead_tokens"] == 0 and "base_model" not in fields
    image = ImageModel.model_validate({"kind": "image", "handler": "h", "version": "1", "optimize": False})
    assert {"weights", "kind", "verify"}.isdisjoint(handler_fields(image, ImageModelConfig))
    assert handler_fields(image, ImageModelConfig)["optimize"] is False
