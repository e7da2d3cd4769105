"""The manifest entry of a tabular classifier (``kind: tabular``): its classes and features,
the MLP trained on synthetic rows, plus the handler's keys generated from TabularModelConfig."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt
from tabular_serving.config import TabularModelConfig

from tsbatch.archive.schema import Common, Section, Verify, handler_model


class Training(Section):
    """The synthetic rows (one Gaussian cluster per class) and how long the MLP trains on them."""

    rows_per_class: PositiveInt = 200
    hidden: PositiveInt = 16
    steps: PositiveInt = 200
    seed: int = 0


class TabularBuild(Common):
    """A small MLP over rows of numbers, one answer per row."""

    kind: Literal["tabular"]
    labels: tuple[str, ...] = Field(default=("low", "medium", "high"), min_length=2)
    training: Training = Training()
    verify: Verify = Verify()


TabularModel = handler_model("TabularModel", TabularBuild, TabularModelConfig, {"num_features": PositiveInt})
