"""`pip install .` (not editable) into a fresh venv: the `tsbatch` command lands in its bin/,
lists every job, and the installed package alone runs Locust on its packaged locustfile.

The venv sees the shared environment's packages through a .pth file (torch, Locust and the
rest are not downloaded again) and gets the toolkit with `--no-deps`; the project is copied
first, so the build writes nothing into the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tsbatch.cli.commands import COMMANDS
from tsbatch.paths import REPO_ROOT

pytestmark = pytest.mark.slow

PROJECT_FILES = ("pyproject.toml", "requirements.txt", "tsbatch", "handlers")


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # the venv's own imports
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("install")
    project = root / "project"
    for name in PROJECT_FILES:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            project.mkdir(exist_ok=True)
            shutil.copy2(source, project / name)
    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=root)
    python = venv / "bin" / "python"
    own_site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root)
    (Path(own_site.stdout.strip()) / "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(project)],
        cwd=root,
    )
    return venv


def test_pip_install_puts_tsbatch_on_the_venvs_path_and_it_lists_every_job(
    venv: Path, tmp_path: Path
) -> None:
    tsbatch = venv / "bin" / "tsbatch"
    assert tsbatch.is_file(), sorted(path.name for path in (venv / "bin").iterdir())
    text = run([str(tsbatch), "--help"], cwd=tmp_path).stdout
    for name, command in COMMANDS.items():
        assert f"  {name} " in text and command.summary in text, name


def test_the_installed_package_is_complete(venv: Path, tmp_path: Path) -> None:
    """The toolkit, the handlers' modules and the locustfile come from the venv, not the checkout."""
    probe = (
        "import batchkit, intent_handler, resnet_handler, tsbatch\n"
        "from tsbatch.cli.loadtest import LOCUSTFILE\n"
        "for module in (batchkit, intent_handler, resnet_handler, tsbatch):\n"
        "    print(module.__file__)\n"
        "print(LOCUSTFILE if LOCUSTFILE.is_file() else 'missing')\n"
    )
    files = run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path).stdout.split()
    assert len(files) == 5 and all(Path(file).is_relative_to(venv) for file in files), files
    tsbatch = str(venv / "bin" / "tsbatch")
    assert (
        "--sla-profile" in run([tsbatch, "loadtest", "--help"], cwd=tmp_path).stdout
    )  # the plugin's options
    listed = run([tsbatch, "loadtest", "--list"], cwd=tmp_path).stdout  # Locust loads the packaged locustfile
    assert "TorchServeUser" in listed and "MultiInputUser" in listed, listed


def test_the_installed_command_finds_the_checkout_it_runs_in(venv: Path) -> None:
    """A plain install run inside a checkout resolves models.yaml, config.properties and sla.yaml there."""
    probe = "from tsbatch.paths import DEFAULT_SLA_FILE, REPO_ROOT; print(REPO_ROOT); print(DEFAULT_SLA_FILE.is_file())"
    root, sla_found = run([str(venv / "bin" / "python"), "-c", probe], cwd=REPO_ROOT / "docs").stdout.split()
    assert Path(root) == REPO_ROOT and sla_found == "True"
