"""Every shell helper parses (`bash -n`): a quote left open in a late step would otherwise
only show when that step runs, on a lent GPU, where its minutes cannot be had back."""

from __future__ import annotations

import subprocess

import pytest

from tsbatch.paths import REPO_ROOT

SCRIPTS = sorted((REPO_ROOT / "scripts").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_the_script_parses(script) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_every_script_is_checked() -> None:
    assert any(script.name == "gpu_check.sh" for script in SCRIPTS)
