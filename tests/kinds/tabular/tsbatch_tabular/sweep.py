"""What the in-process sweep times for a tabular model: its built TorchScript, or an
untrained MLP of the entry's shape, fed rows of random numbers."""

from __future__ import annotations

from pathlib import Path

import torch

from tsbatch.analysis.sweep.inputs import POOL_SIZE, Scenario, cycle
from tsbatch.analysis.sweep.swept import SweptModel
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec
from tsbatch_tabular.export import mlp
from tsbatch_tabular.schema import TabularModel


def row_scenario(num_features: int) -> Scenario:
    rows = list(torch.randn(POOL_SIZE, num_features, generator=torch.Generator().manual_seed(0)))
    return Scenario(
        name=f"random rows of {num_features}",
        batch=lambda size, offset: (torch.stack(cycle(rows, size, offset)),),
        single=lambda index: (rows[index % len(rows)].unsqueeze(0),),
    )


def archive_swept_model(name: str, artifact_dir: Path) -> SweptModel:
    handler = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    module = torch.jit.load(str(artifact_dir / handler["model_file"]), map_location="cpu").eval()
    return SweptModel(
        name=name,
        sla_model=name,
        description=f"build/{name}/{handler['model_file']} (MLP over {handler['num_features']} features)",
        module=module,
        scenarios=[row_scenario(int(handler["num_features"]))],
    )


def stand_in(spec: ModelSpec, work_dir: Path) -> SweptModel:
    """The entry's MLP untrained: its shape and time, none of its answers."""
    entry = spec.entry_as(TabularModel)
    model = mlp(entry).eval()
    return SweptModel(
        name=f"{spec.name}-{spec.kind.stand_in}",
        sla_model=spec.name,
        description=f"MLP over {entry.num_features} features, RANDOM weights - timing only",
        module=model,
        scenarios=[row_scenario(entry.num_features)],
    )
