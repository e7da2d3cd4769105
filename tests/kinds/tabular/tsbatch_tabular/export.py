"""Build ``build/<model>/`` for a tabular classifier: train a small MLP on synthetic rows,
script it, check TorchScript against eager at each verified batch size, write what the
worker loads (the model, labels, handler config) and what the build saw (build info)."""

from __future__ import annotations

import argparse
import sys

import torch

from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ManifestError, ModelSpec
from tsbatch_tabular.schema import TabularModel


class ExportError(RuntimeError):
    """TorchScript that does not answer as the eager model does."""


def synthetic_rows(entry: TabularModel) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows_per_class`` rows around each class's own centre: separable, so a few steps learn it."""
    generator = torch.Generator().manual_seed(entry.training.seed)
    classes, count = len(entry.labels), entry.training.rows_per_class
    centres = torch.randn(classes, entry.num_features, generator=generator) * 3
    rows = centres.repeat_interleave(count, dim=0)
    rows += torch.randn(rows.shape, generator=generator)
    return rows, torch.arange(classes).repeat_interleave(count)


def mlp(entry: TabularModel) -> torch.nn.Module:
    """The entry's MLP with seeded random weights."""
    torch.manual_seed(entry.training.seed)
    hidden = entry.training.hidden
    return torch.nn.Sequential(
        torch.nn.Linear(entry.num_features, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, len(entry.labels)),
    )


def trained_mlp(entry: TabularModel, rows: torch.Tensor, targets: torch.Tensor) -> torch.nn.Module:
    model = mlp(entry)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(entry.training.steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(rows), targets).backward()
        optimizer.step()
    return model.eval()


def verified(entry: TabularModel, model: torch.nn.Module, rows: torch.Tensor) -> torch.jit.ScriptModule:
    """The scripted model, whose answers at every verified batch size are the eager ones within atol."""
    scripted = torch.jit.script(model)
    with torch.inference_mode():
        for size in entry.verify.batch_sizes:
            difference = float((scripted(rows[:size]) - model(rows[:size])).abs().max())
            if difference > entry.verify.atol:
                raise ExportError(f"TorchScript differs from eager by {difference:.2e} at batch {size}")
    return scripted


def export(spec: ModelSpec) -> None:
    entry = spec.entry_as(TabularModel)
    rows, targets = synthetic_rows(entry)
    model = trained_mlp(entry, rows, targets)
    with torch.inference_mode():
        accuracy = float((model(rows).argmax(dim=1) == targets).float().mean())
    scripted = verified(entry, model, rows)
    out = spec.artifact_dir
    out.mkdir(parents=True, exist_ok=True)
    scripted.save(str(out / artifacts.MODEL_FILE))
    artifacts.write_json(out / artifacts.LABELS_FILE, list(entry.labels))
    artifacts.write_json(out / artifacts.HANDLER_CONFIG_FILE, spec.kind.handler_config(spec.name, entry, {}))
    info = {
        "model": spec.name,
        "rows": len(rows),
        "training_accuracy": accuracy,
        # Each class's mean training row: a row that should come back as that class.
        "class_centres": {
            label: rows[targets == index].mean(dim=0).tolist() for index, label in enumerate(entry.labels)
        },
        "torch": torch.__version__,
    }
    artifacts.write_json(out / artifacts.BUILD_INFO_FILE, info)
    print(f"[export] {spec.name}: MLP on {len(rows)} synthetic rows (accuracy {accuracy:.3f}) -> {out}")


def export_with_options(spec: ModelSpec, args: argparse.Namespace) -> int:
    """``tsbatch export`` for a tabular model (no options of its own)."""
    try:
        export(spec)
    except (ExportError, ManifestError) as exc:
        print(f"[export] FAILED: {exc}", file=sys.stderr)
        return 1
    return 0
