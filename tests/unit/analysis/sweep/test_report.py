"""The sweep's reports: CSV, plots drawn from it read back, and a summary naming the knee."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from tsbatch.analysis.selection import knee_batch_size
from tsbatch.analysis.sweep.measure import Budget
from tsbatch.analysis.sweep.report import write_reports
from tsbatch.analysis.sweep.rows import read_csv
from tsbatch.analysis.sweep.run import run_sweep
from tsbatch.analysis.sweep.swept import SweptModel

FAST = Budget(iters=3, warmup=1, min_iters=2, max_seconds=2.0)
CPU = torch.device("cpu")


def test_reports_are_written_from_the_csv_and_name_the_knee(
    tiny_swept_model: SweptModel, tmp_path: Path
) -> None:
    result = run_sweep([tiny_swept_model], [1, 2, 4, 8], CPU, ["fp32", "fp16"], FAST, log=lambda _: None)
    meta = {
        "device": "CPU",
        "device_type": "cpu",
        "torch": torch.__version__,
        "threads": 1,
        "iters": 3,
        "warmup": 1,
        "max_seconds": 2.0,
    }
    paths = write_reports(result, [tiny_swept_model], tmp_path, meta, {"tiny": 50.0})
    rows = read_csv(paths["csv"])
    assert rows == result.rows
    knee = knee_batch_size([r.batch_size for r in rows], [r.throughput_sps for r in rows])
    summary = paths["summary"].read_text()
    assert f"| tiny | 16x16 | fp32 | {max(r.throughput_sps for r in rows):.1f} (" in summary
    assert f"| {knee}" in summary
    assert "fp16 autocast skipped: no GPU" in summary
    image = np.asarray(Image.open(tmp_path / "tiny_fp32.png").convert("L"))
    assert image.shape == (480, 1200) and image.std() > 10
