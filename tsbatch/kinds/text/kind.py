"""The text intent classifier kind (``kind: text``): a fine-tuned BERT-family encoder behind
handlers/text_classifier_handler.py."""

from __future__ import annotations

from batchkit.protocols import InputSchema
from text_serving.config import TextModelConfig
from tsbatch.archive.kind import Exporter, Kind, SweptModels
from tsbatch.config.findings import Problem
from tsbatch.kinds.text import workload
from tsbatch.kinds.text.options import add_export_options
from tsbatch.kinds.text.schema import TextModel
from tsbatch.paths import HANDLERS_DIR

# A token of our tokenizers is at most this many UTF-8 bytes on average in the worst case
# (long words, accents): a bound for the size of a text of max_length tokens.
BYTES_PER_TOKEN = 8


def input_schema() -> InputSchema:
    from text_serving.text import TEXT_INPUTS  # imported here: text pulls in torch

    return TEXT_INPUTS


def limits(where: str, entry: TextModel, request_limit: int) -> list[Problem]:
    """A request of max_inputs_per_request texts, each max_length tokens long, must fit the body limit."""
    inputs, largest = entry.max_inputs_per_request, entry.max_length * BYTES_PER_TOKEN + 4  # quotes, comma
    texts, ceiling = inputs * largest, min(request_limit, entry.max_body_bytes)
    if texts <= ceiling:
        return []
    return [
        Problem(
            "warning",
            f"{where}.max_inputs_per_request",
            f"{inputs} texts of max_length {entry.max_length} tokens can take {texts} bytes, "
            f"above the {ceiling}-byte body limit (max_body_bytes, max_request_size): such a request "
            f"is refused whole. Lower max_inputs_per_request to {ceiling // largest} or raise the limit.",
        )
    ]


# The build and the sweep, each importing its module only when called: they pull in transformers
# that the load generators, which import this record, never need.
def exporter() -> Exporter:
    from tsbatch.kinds.text import export

    return export


def swept_models() -> SweptModels:
    from tsbatch.kinds.text import sweep

    return sweep


TEXT = Kind(
    name="text",
    entry=TextModel,
    config=TextModelConfig,
    handler="handlers/text_classifier_handler.py",
    handler_modules=(HANDLERS_DIR / "text_serving",),  # its decoding, config and errors
    resolved=frozenset({"tokenizer_dir", "base_model", "oos_threshold"}),
    exporter=exporter,
    export_options=add_export_options,
    swept_models=swept_models,
    stand_in="base",
    workload=workload.WORKLOAD,
    input_schema=input_schema,
    largest_answer=workload.largest_answer,
    limits=limits,
)
