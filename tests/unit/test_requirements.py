"""requirements.txt holds every package the installed toolkit imports, at module level or
inside a function: `pip install .` must give a `tsbatch` whose every command runs.

The integration test (tests/integration/test_install.py) imports every module from a venv
that sees only these packages; this one also reaches the imports made inside functions.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

from tsbatch.paths import REPO_ROOT

OWN_ROOTS = {
    "tsbatch",
    "batchkit",
    "image_serving",
    "text_serving",
    "image_classifier_handler",
    "text_classifier_handler",
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements() -> list[str]:
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    return [Requirement(line).name for line in lines if line.strip() and not line.startswith(("#", "-"))]


def runtime_closure() -> set[str]:
    """The distributions requirements.txt brings, with what they require in turn."""
    seen: set[str] = set()
    pending = [normalized(name) for name in runtime_requirements()]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(normalized(requirement.name))
    return seen


def imported_roots(folder: Path) -> dict[str, str]:
    """Every top-level module imported anywhere under ``folder``, with one file importing it."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(REPO_ROOT)))
    return found


def test_every_package_the_toolkit_imports_is_a_runtime_requirement() -> None:
    closure = runtime_closure()
    providers = metadata.packages_distributions()
    missing = []
    for folder in ("tsbatch", "handlers"):
        for root, where in imported_roots(REPO_ROOT / folder).items():
            if root in sys.stdlib_module_names or root in OWN_ROOTS or root == "__future__":
                continue
            distributions = providers.get(root, [])
            if not any(normalized(d) in closure for d in distributions):
                missing.append(f"{root} ({where}; distribution {distributions or 'unknown'})")
    assert not missing, f"imported but not in requirements.txt (nor required by it): {missing}"


def test_the_development_file_adds_to_the_runtime_one() -> None:
    development = (REPO_ROOT / "requirements-dev.txt").read_text().splitlines()
    assert "-r requirements.txt" in development
    dev_only = {normalized(Requirement(line).name) for line in development if line and line[0] not in "#-"}
    assert not dev_only & {normalized(name) for name in runtime_requirements()}, "pinned twice"
