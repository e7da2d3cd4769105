"""Run a Dockerfile's ENV/ARG/WORKDIR/RUN instructions as written, in an isolated root.

No container engine runs in the suite, so the build's shell lines are run the way an
engine runs them: each RUN on its own under ``/bin/sh -c``, with the environment the
ENV/ARG lines give, in the WORKDIR, inside a private root (``unshare --mount`` +
``chroot``): the host's /usr, /etc and /dev read-only, a writable /usr/local holding the
base image's interpreter (a ``python`` as in ``python:3.11-slim``), and empty /opt, /app
and /tmp. The build context is a stub (a one-module wheel as the requirements, a stub
toolkit whose ``tsbatch`` command reports the interpreter it runs under), so the run takes
seconds and pip stays offline. RUN lines that need the network and the base image's
package manager (apt-get) are not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from tests.unit.deploy.readers import instructions

HOST_PYTHON = "/usr/bin/python3.11"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # python:3.11-slim's
MARKER = "tsbatch_requirement_marker"  # the one requirement; importable = installed here
REPORT = "app/build-report.json"
# Base interpreter layouts: "image" is python:3.11-slim's (/usr/local/bin/python is the
# interpreter itself); "wrapper" is a `python` that execs the interpreter by its full path
# (pyenv's shims do this), where CPython can no longer find a venv earlier on PATH.
LAYOUTS = ("image", "wrapper")
WRAPPER = '#!/bin/sh\nexec /usr/local/bin/python3.11 "$@"\n'
STUB_TOOLKIT = f"""import json, sys


def main():
    try:
        import {MARKER}
        found = {MARKER}.__file__
    except ImportError:
        found = None
    json.dump({{"prefix": sys.prefix, "requirement": found}}, open("/{REPORT}", "w"))
"""
# The stub toolkit's console script, as pyproject.toml's [project.scripts] declares the real one.
STUB_ENTRY_POINTS = "[console_scripts]\ntsbatch = stub_toolkit:main\n"
STUB_PYPROJECT = """[build-system]
requires = []
build-backend = "stub_backend"
backend-path = ["."]
"""
# A PEP 517 backend with no dependency: pip builds the stub projects offline with it.
STUB_BACKEND = """import base64, hashlib, os, zipfile

NAME = os.path.basename(os.getcwd())


def _wheel(directory, files):
    dist = NAME + "-1.0"
    files = dict(files)
    files[dist + ".dist-info/METADATA"] = "Metadata-Version: 2.1\\nName: " + NAME + "\\nVersion: 1.0\\n"
    files[dist + ".dist-info/WHEEL"] = "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    if os.path.exists("entry_points.txt"):
        files[dist + ".dist-info/entry_points.txt"] = open("entry_points.txt").read()
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(name + ",sha256=" + digest + "," + str(len(text.encode())))
    files[dist + ".dist-info/RECORD"] = "\\n".join(record + [dist + ".dist-info/RECORD,,"]) + "\\n"
    filename = dist + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return filename


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {NAME + ".py": ""})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {NAME + ".pth": os.getcwd() + "\\n"})
"""


def isolation_available() -> str | None:
    """Why the isolated run cannot happen here, or None."""
    if os.geteuid() != 0:
        return "needs root (unshare --mount, chroot)"
    for tool in ("unshare", "chroot", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing"
    if not Path(HOST_PYTHON).exists():
        return f"{HOST_PYTHON} is missing"
    return None


def stub_context(app: Path) -> None:
    """The build context: requirements.txt naming one stub project, a stub toolkit."""
    for project in (app, app / MARKER):
        project.mkdir(parents=True, exist_ok=True)
        (project / "pyproject.toml").write_text(STUB_PYPROJECT)
        (project / "stub_backend.py").write_text(STUB_BACKEND)
    (app / "requirements.txt").write_text(f"/app/{MARKER}\n")
    (app / "stub_toolkit.py").write_text(STUB_TOOLKIT)
    (app / "entry_points.txt").write_text(STUB_ENTRY_POINTS)


def expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)


def build_stage_steps(dockerfile: Path) -> list[tuple[str, str]]:
    """The instructions of every stage before the last (the runtime base and the build)."""
    steps = instructions(dockerfile)
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return [step for step in steps[:last_from] if step[0] in ("ENV", "ARG", "WORKDIR", "RUN")]


def run_build_stages(dockerfile: Path, root: Path, layout: str = "image") -> dict[str, str | None]:
    """Run the build stages' instructions in a private root; return the stub build's report:
    the prefix `tsbatch archive` ran under and where it found the requirement."""
    for directory in ("usr", "etc", "dev", "opt", "tmp"):
        (root / directory).mkdir(parents=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        os.symlink(f"usr/{link}", root / link)
    stub_context(root / "app")
    local = root / "usr-local"
    env = {
        "PATH": BASE_PATH,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PIP_NO_INDEX": "1",  # offline: everything comes from the stub context
        "PIP_CONFIG_FILE": "/dev/null",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    workdir = "/"
    script = [
        "set -e",
        f"mount --bind /usr {root}/usr && mount -o remount,bind,ro {root}/usr",
        f"mount --bind /etc {root}/etc && mount -o remount,bind,ro {root}/etc",
        f"mount --rbind /dev {root}/dev",
        f"mkdir -p {local} && mount --bind {local} {root}/usr/local",
        # the base image's interpreter: /usr/local/bin/python, with pip
        f"chroot {root} {HOST_PYTHON} -m venv /usr/local",
    ]
    if layout == "wrapper":
        wrapper = local / "bin" / "python"
        script.append(f"rm {wrapper} && printf {shlex.quote(WRAPPER)} > {wrapper} && chmod 755 {wrapper}")
    for keyword, arguments in build_stage_steps(dockerfile):
        if keyword == "ENV" or (keyword == "ARG" and "=" in arguments):
            for pair in shlex.split(arguments):
                key, _, value = pair.partition("=")
                env[key] = expand(value, env)
        elif keyword == "WORKDIR":
            workdir = expand(arguments, env)
            script.append(f"mkdir -p {root}{workdir}")
        elif keyword == "RUN" and "apt-get" not in arguments:
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            inner = f"cd {shlex.quote(workdir)} && exec /bin/sh -c {shlex.quote(arguments)}"
            script.append(f"env -i {exports} chroot {root} /bin/sh -c {shlex.quote(inner)}")
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = root / REPORT
    if result.returncode != 0 and not report.exists():
        raise AssertionError(
            f"the Dockerfile's RUN lines failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return json.loads(report.read_text())
