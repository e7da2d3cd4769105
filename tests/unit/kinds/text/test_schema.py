"""The text entry: four keys and a folder build; everything else has its default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tsbatch.kinds.text.schema import DEFAULT_BASE_MODEL, PretrainedWeights, TextModel

FOUR_KEYS = {"kind": "text", "handler": "handlers/text_classifier_handler.py", "version": "1.0"}


def test_an_entry_of_four_keys_and_a_folder_is_valid_with_every_default() -> None:
    entry = TextModel.model_validate({**FOUR_KEYS, "weights": {"path": "models/mine"}})
    assert entry.weights == PretrainedWeights(path="models/mine")
    assert entry.weights.texts is None and entry.weights.oos_threshold is None
    assert entry.model_fields_set == {"kind", "handler", "version", "weights"}  # what "asked" reads
    assert entry.base_model == DEFAULT_BASE_MODEL and entry.data.test is None


def test_a_training_entry_has_no_weights() -> None:
    assert TextModel.model_validate(FOUR_KEYS).weights is None


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({}, "weights.path\n  Field required"),
        (
            {"path": "m", "oos_threshold": 1.5},
            "weights.oos_threshold\n  Input should be less than or equal to 1",
        ),
        ({"path": "m", "labels": "l.txt"}, "weights.labels\n  Extra inputs are not permitted"),
    ],
)
def test_a_bad_weights_section_names_the_key(weights: dict, message: str) -> None:
    with pytest.raises(ValidationError) as error:
        TextModel.model_validate({**FOUR_KEYS, "weights": weights})
    assert message in str(error.value)
