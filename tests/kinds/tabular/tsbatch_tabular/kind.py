"""The tabular classifier kind (``kind: tabular``): a small MLP over rows of numbers behind
its handler (tabular_classifier_handler.py in tabular_serving). This record is what the
distribution's ``tsbatch.kinds`` entry point names; the toolkit reaches the kind through it."""

from __future__ import annotations

from pathlib import Path

import tabular_serving
from tabular_serving.config import TabularModelConfig

from batchkit.protocols import InputSchema
from tsbatch.archive.kind import Exporter, Kind, SweptModels, TakesOptions
from tsbatch.config.findings import Problem
from tsbatch_tabular import workload
from tsbatch_tabular.schema import TabularModel

SERVING = Path(tabular_serving.__file__).parent
# A number as JSON writes it, at most ("-1.2345678901234567e-308") and its comma.
BYTES_PER_NUMBER = 25


def input_schema() -> InputSchema:
    from tabular_serving.features import TABULAR_INPUTS  # imported here: it pulls in torch

    return TABULAR_INPUTS


def limits(where: str, entry: TabularModel, request_limit: int) -> list[Problem]:
    """A request of max_inputs_per_request rows must fit the body limits."""
    row = entry.num_features * BYTES_PER_NUMBER + len('{"features": []}')
    rows, ceiling = entry.max_inputs_per_request * row, min(request_limit, entry.max_body_bytes)
    if rows <= ceiling:
        return []
    return [
        Problem(
            "warning",
            f"{where}.max_inputs_per_request",
            f"{entry.max_inputs_per_request} rows of {entry.num_features} numbers can take {rows} bytes, "
            f"above the {ceiling}-byte body limit: lower max_inputs_per_request to {ceiling // row} or raise it.",
        )
    ]


def export_options(parser: TakesOptions) -> None:
    """``tsbatch export`` takes no option of its own for a tabular model."""


# The build and the sweep, each importing its module only when called (torch, for both).
def exporter() -> Exporter:
    from tsbatch_tabular import export

    return export


def swept_models() -> SweptModels:
    from tsbatch_tabular import sweep

    return sweep


TABULAR = Kind(
    name="tabular",
    entry=TabularModel,
    config=TabularModelConfig,
    handler=str(SERVING / "tabular_classifier_handler.py"),
    resolved=frozenset(),
    exporter=exporter,
    export_options=export_options,
    swept_models=swept_models,
    stand_in="untrained",
    workload=workload.WORKLOAD,
    input_schema=input_schema,
    largest_answer=workload.largest_answer,
    limits=limits,
    handler_modules=(SERVING,),
)
