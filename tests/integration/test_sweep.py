"""`make sweep` end to end on the exported models, with small limits."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tsbatch.analysis.selection import knee_batch_size
from tsbatch.analysis.sweep import curves, read_csv
from tsbatch.archive.artifacts import HANDLER_CONFIG_FILE, read_json
from tsbatch.archive.manifest import load_manifest
from tsbatch.paths import REPO_ROOT

pytestmark = pytest.mark.slow


def built_models() -> list[str]:
    return [
        name for name, spec in load_manifest().models.items() if (spec.artifact_dir / "model.pt").exists()
    ]


def compiled_models(models: list[str]) -> list[str]:
    """The sweep's runtime dimension: `<model>-aoti` for each archive with a gated CPU .pt2."""
    specs = load_manifest().models
    return [
        f"{name}-aoti"
        for name in models
        if any(
            file.startswith("model.cpu-")
            for file in read_json(specs[name].artifact_dir / HANDLER_CONFIG_FILE).get("compiled_models", [])
        )
    ]


def test_make_sweep_writes_csv_plots_and_a_summary_naming_the_knee(model_store: Path, tmp_path: Path) -> None:
    models = built_models()
    assert "resnet18" in models
    out = tmp_path / "sweep"
    chosen = " ".join(f"--model {name}" for name in models)
    # `-o archive`: the model_store fixture has just built what can be built; a model whose
    # build fails is reported by the tests that serve it, and left out here.
    command = [
        "make",
        "--no-print-directory",
        "-o",
        "archive",
        "sweep",
        f"ARGS={chosen} --max-batch 8 --iters 4 --warmup 1 --max-seconds 2 --out {out}",
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    rows = read_csv(out / "sweep.csv")
    summary = (out / "summary.md").read_text()
    assert "fp16 autocast skipped: no GPU" in summary or rows[0].device == "cuda"
    groups = dict(curves(rows))
    assert {model for model, _, _ in groups} == set(models) | set(compiled_models(models))
    for (model, scenario, precision), group in groups.items():
        assert [r.batch_size for r in group] == [1, 2, 4, 8], (model, scenario)
        assert all(r.status == "ok" and r.throughput_sps > 0 for r in group)
        assert all(r.top1_agreement == 1.0 for r in group if precision == "fp32")
        # the summary's knee is the knee of the CSV the plots were drawn from
        knee = knee_batch_size([r.batch_size for r in group], [r.throughput_sps for r in group])
        line = next(
            line
            for line in summary.splitlines()
            if line.startswith(f"| {model} | {scenario} | {precision} |")
        )
        assert line.split(" | ")[4].split(" ")[0] == str(knee)
    if "bert_intent" in models:
        scenarios = {scenario for model, scenario, _ in groups if model == "bert_intent"}
        assert any(s.startswith("utterances") for s in scenarios) and any(
            s.startswith("fixed") for s in scenarios
        )

    for model in models:
        plot = out / f"{model}_fp32.png"
        image = np.asarray(Image.open(plot).convert("L"))
        assert image.shape == (480, 1200) and image.std() > 10, plot
        assert f"({plot.name})" in summary
