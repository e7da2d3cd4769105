"""`pip install .` (not editable) into a fresh venv that sees only the runtime requirements:
the `tsbatch` command lands in its bin/, every module of the package imports, every command
answers --help, the tuner tunes a stock archive and writes its plot, and the installed
package alone runs Locust on its packaged locustfile.

Nothing is downloaded: the venv gets the packages requirements.txt brings (and what they
require), linked from this environment into a folder of their own and named by a .pth file, with
their commands (torchserve, torch-model-archiver) written as pip writes them,
so a package that only requirements-dev.txt installs is missing there, as after a user's
`pip install .`. The toolkit is installed from a wheel built from a copy of the project, so
the build writes nothing into the checkout.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_requirements import runtime_closure
from tsbatch.cli.commands import COMMANDS
from tsbatch.paths import REPO_ROOT

pytestmark = pytest.mark.slow

PROJECT_FILES = ("pyproject.toml", "requirements.txt", "tsbatch", "handlers")
# Every module of the installed package imported, and every command's --help, in one process.
IMPORT_ALL = r"""
import locust  # first, as when Locust runs: its gevent patching must precede any ssl import
import importlib, pkgutil, sys
import batchkit, tsbatch
failed = []
for package in (tsbatch, batchkit):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except Exception as exc:
            failed.append(f"{module.name}: {type(exc).__name__}: {exc}")
for name in ("image_classifier_handler", "text_classifier_handler"):
    importlib.import_module(name)
print("\n".join(failed) or "all imported")
sys.exit(1 if failed else 0)
"""
EVERY_HELP = r"""
import contextlib, io, sys
from tsbatch.cli.commands import COMMANDS
from tsbatch.cli.main import main
failed = []
for command in COMMANDS.values():
    for words in ([[command.name, t.name] for t in command.subcommands] or [[command.name]]):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                main([*words, "--help"])
        except SystemExit as stop:
            if stop.code not in (0, None):
                failed.append(f"{words}: exit {stop.code}")
        except Exception as exc:
            failed.append(f"{words}: {type(exc).__name__}: {exc}")
print("\n".join(failed) or "every help printed")
sys.exit(1 if failed else 0)
"""


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # the venv's own imports
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result


def write_console_scripts(bin_dir: Path, python: Path) -> None:
    """The commands the runtime distributions install (``torchserve``, ``torch-model-archiver``,
    ``locust``, ...), as pip would write them, run by the venv's own interpreter."""
    for name in runtime_closure():
        for entry in metadata.distribution(name).entry_points:
            if entry.group != "console_scripts" or (bin_dir / entry.name).exists():
                continue
            module, _, attribute = entry.value.partition(":")
            script = bin_dir / entry.name
            script.write_text(
                f"#!{python}\nimport sys\nimport {module}\n"
                f"sys.exit({module}.{attribute.strip() or 'main'}())\n"
            )
            script.chmod(0o755)


def link_runtime_packages(target: Path) -> None:
    """The files of every runtime distribution, top-level entries linked into ``target``."""
    target.mkdir(parents=True)
    for name in runtime_closure():
        distribution = metadata.distribution(name)
        base = Path(str(distribution.locate_file("")))
        for file in distribution.files or []:
            top = Path(file).parts[0]
            if top == ".." or (target / top).exists() or top.endswith(".pth"):
                continue
            source = base / top
            if source.exists():
                (target / top).symlink_to(source)


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
    wheels = root / "wheels"
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(wheels), str(project)],
        cwd=root,
    )  # fmt: skip
    link_runtime_packages(root / "runtime-packages")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=root)
    python = venv / "bin" / "python"
    own_site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root)
    (Path(own_site.stdout.strip()) / "runtime.pth").write_text(f"{root / 'runtime-packages'}\n")
    write_console_scripts(venv / "bin", python)
    (wheel,) = wheels.glob("*.whl")
    run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], cwd=root)
    return venv


def test_the_venv_sees_the_runtime_requirements_only(venv: Path, tmp_path: Path) -> None:
    """The check below means something: a development-only package is not importable here."""
    probe = "import importlib.util as u; print(*(u.find_spec(m) is not None for m in ('captum', 'kserve', 'torch')))"
    assert run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path).stdout.split() == [
        "False",
        "False",
        "True",
    ]


def test_every_module_of_the_installed_package_imports(venv: Path, tmp_path: Path) -> None:
    result = run([str(venv / "bin" / "python"), "-c", IMPORT_ALL], cwd=tmp_path, timeout=600)
    assert result.stdout.strip() == "all imported", result.stdout


def test_every_installed_command_answers_help(venv: Path, tmp_path: Path) -> None:
    result = run([str(venv / "bin" / "python"), "-c", EVERY_HELP], cwd=tmp_path, timeout=600)
    assert result.stdout.strip().endswith("every help printed"), result.stdout


def test_the_installed_command_runs_a_real_job(venv: Path) -> None:
    """`tsbatch doctor` in the checkout: the planner, the build records, torch on this CPU."""
    result = run([str(venv / "bin" / "tsbatch"), "doctor"], cwd=REPO_ROOT, timeout=300)
    assert "resnet18" in result.stdout, result.stdout[-2000:]


JSON_HANDLER = '''"""Answers {"count": n} for a JSON list of n numbers, one answer per request."""
import json


def handle(data, context):
    if data is None:
        return None
    return [{"count": len(json.loads(row.get("body") or row.get("data")))} for row in data]
'''


def test_the_installed_tuner_tunes_a_stock_archive_and_writes_its_plot(venv: Path, tmp_path: Path) -> None:
    """`tsbatch tune --mar A --requests D --quick` from the installed package alone: its points
    through TorchServe, then the summary and the plot (matplotlib is a runtime requirement)."""
    (tmp_path / "counting.py").write_text(JSON_HANDLER)
    bodies = tmp_path / "requests"
    bodies.mkdir()
    (bodies / "one.json").write_text("[1, 2, 3]")
    archiver = [str(venv / "bin" / "torch-model-archiver"), "--model-name", "counting", "--version", "1.0",
                "--handler", str(tmp_path / "counting.py"), "--export-path", str(tmp_path)]  # fmt: skip
    run(archiver, cwd=tmp_path)
    for name in ("config.properties", "metrics.yaml"):  # the config and the metrics file it names
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    out = tmp_path / "tune"
    tune = [str(venv / "bin" / "tsbatch"), "tune", "--mar", str(tmp_path / "counting.mar"), "--requests",
            str(bodies), "--quick", "--p99-ms", "2000", "--measure-s", "3", "--warmup-s", "1", "--out", str(out)]  # fmt: skip
    result = subprocess.run(tune, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode in (0, 2), result.stdout[-3000:] + result.stderr[-3000:]  # 2: no winner here
    assert (out / "summary.md").is_file() and (out / "counting.png").stat().st_size > 0, result.stdout[-3000:]
    assert "FileNotFoundError" not in result.stdout, result.stdout[-3000:]


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
        "import batchkit, text_classifier_handler, image_classifier_handler, tsbatch\n"
        "from tsbatch.cli.loadtest import LOCUSTFILE\n"
        "for module in (batchkit, text_classifier_handler, image_classifier_handler, tsbatch):\n"
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
