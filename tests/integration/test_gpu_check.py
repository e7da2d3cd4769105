"""`scripts/gpu_check.sh` on the CPU (GPU_CHECK_DEVICE=cpu): a lent GPU gives minutes, so the
script must work the first time it meets one. Run as docs/batch-analysis.md shows it, with no
OUT_DIR (the reports land in the repository's reports/gpu-check), and from another directory
than the repository root. Small limits; the archives are the suite's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from batchkit.candidates import ServingCandidate
from tsbatch.archive.compiled import host_targets
from tsbatch.paths import REPO_ROOT

pytestmark = pytest.mark.slow


def test_gpu_check_runs_every_step_and_ends_with_one_table(model_store: Path, tmp_path: Path) -> None:
    precision = ServingCandidate.parse(host_targets()[0]).precision  # what this CPU's build compiles
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "GPU_CHECK_DEVICE": "cpu",
        "GPU_CHECK_BUILD": "0",
        "GPU_CHECK_MAX_BATCH": "2",
        "GPU_CHECK_ITERS": "2",
        "GPU_CHECK_LOCUST_TIME": "6s",
        "GPU_CHECK_LOCUST_USERS": "4",
        "GPU_CHECK_DECODE_THREADS": "2",
        "GPU_CHECK_DECODE_SECONDS": "1",  # every decode row measures, briefly
        "GPU_CHECK_PHOTO_SIZES": "1920x1080",  # the photo rows' code on the CPU, at one small size
    }
    out = REPO_ROOT / "reports" / "gpu-check"  # the default OUT_DIR
    shutil.rmtree(out, ignore_errors=True)
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "gpu_check.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = out / "summary_table.md"
    assert summary.is_file(), result.stdout[-3000:] + result.stderr[-3000:]
    table = summary.read_text()
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    steps = {row[0].lstrip("| ") for row in rows}
    assert {"build gate", "sweep", f"serve {precision}", "decode", "serve decode", "decode photo"} <= steps, (
        table
    )
    decoded = {row[2] for row in rows if row[0].lstrip("| ") in ("decode", "serve decode")}
    expected = {"mixed JPEG+PNG batch on cpu", "pil x2 on the CPU", "tensor on cpu", "pil x2", "tensor x1"}
    assert expected <= decoded, table
    assert any(step.startswith("locust ") for step in steps), table
    for row in rows:
        if row[0].lstrip("| ").startswith("locust "):
            assert row[4].startswith(("exit 0", "exit 1")), (
                table
            )  # ran; an SLA breach on a busy CPU is not a script fault
        else:
            assert row[3] == "PASS", table
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    assert table in result.stdout, "the table is the script's last output"
