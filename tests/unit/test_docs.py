"""Every path, make target, `tsbatch` command and Python module the README and docs/ name exists.

Docs drift silently (a moved module, a folder that never existed); this reads the code
spans, code blocks and links of README.md and docs/*.md and checks each name against the
repository, so a rename that forgets the docs fails here.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tsbatch.cli.commands import COMMANDS
from tsbatch.paths import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
# Paths are checked when they start in one of these (build outputs such as build/,
# model-store/, reports/ and .serve/ exist only after a build and are left out).
SOURCE_ROOTS = (
    "handlers/",
    "tsbatch/",
    "scripts/",
    "loadtest/",
    "deploy/",
    "observability/",
    "data/",
    "docs/",
    "tests/",
)
SOURCE_FILES = ("models.yaml", "config.properties", "metrics.yaml", "Makefile", "Dockerfile", "requirements")
PLACEHOLDER = re.compile(r"[<>*{}]|\.\.\.|\bN\b")


def code_texts(text: str) -> list[str]:
    """The code of a page: inline spans and fenced blocks."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    without_blocks = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    return blocks + re.findall(r"`([^`\n]+)`", without_blocks)


def named_paths(page: Path) -> set[str]:
    text = page.read_text()
    found = set()
    # kubectl names cluster objects (deploy/locust-worker), not files.
    lines = [line for code in code_texts(text) for line in code.splitlines() if "kubectl " not in line]
    for code in lines:
        for token in re.split(r"[\s,;()=\"'\[\]]+", code):
            token = token.rstrip(".:")
            if (token.startswith(SOURCE_ROOTS) or token in SOURCE_FILES) and not PLACEHOLDER.search(token):
                found.add(token)
    for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not link.startswith(("http://", "https://", "mailto:")):
            found.add(str((page.parent / link).resolve().relative_to(REPO_ROOT)))
    return found


def named_targets(page: Path) -> set[str]:
    return {
        target
        for code in code_texts(page.read_text())
        for target in re.findall(r"(?:^|[\s`;&|(])make ([a-z][a-z0-9-]*)", code, re.M)
    }


def named_commands(page: Path) -> set[str]:
    """`tsbatch <command>` and `tsbatch bench <target>` as the docs show them (options left out)."""
    return {
        " ".join(words.split())
        for code in code_texts(page.read_text())
        for words in re.findall(r"(?:^|[\s`;&|(/])tsbatch((?: +[a-z][a-z0-9-]*){1,2})", code, re.M)
    }


def command_exists(words: str) -> bool:
    name, _, target = words.partition(" ")
    command = COMMANDS.get(name)
    if command is None:
        return False
    return not command.targets or target in {t.name for t in command.targets}


def named_modules(page: Path) -> set[str]:
    return {
        module
        for code in code_texts(page.read_text())
        for module in re.findall(r"python3? -m ([A-Za-z_][\w.]*)", code)
    }


def module_exists(module: str) -> bool:
    path = REPO_ROOT / module.replace(".", "/")
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return True
    if module.split(".")[0] in {"tsbatch", "scripts", "deploy", "loadtest", "handlers", "tests"}:
        return False
    return importlib.util.find_spec(module) is not None


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-zA-Z][\w-]*):", (REPO_ROOT / "Makefile").read_text(), re.M))


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_named_paths_exist(page: Path) -> None:
    missing = sorted(path for path in named_paths(page) if not (REPO_ROOT / path).exists())
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_named_make_targets_exist(page: Path) -> None:
    missing = sorted(named_targets(page) - make_targets())
    assert not missing, f"{page.name} names make targets the Makefile lacks: {missing}"


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_named_tsbatch_commands_exist(page: Path) -> None:
    missing = sorted(words for words in named_commands(page) if not command_exists(words))
    assert not missing, f"{page.name} names tsbatch commands that do not exist: {missing}"


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_named_modules_exist(page: Path) -> None:
    missing = sorted(module for module in named_modules(page) if not module_exists(module))
    assert not missing, f"{page.name} names modules that do not exist: {missing}"


def test_the_checker_sees_a_missing_name(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Run `make no-such-target`, `python -m tsbatch.no_such` on `tsbatch/no_such.py`,\n"
        "`.venv/bin/tsbatch no-such-command --flag` or `tsbatch bench gpu`, not `tsbatch serve`.\n"
    )
    assert named_targets(page) == {"no-such-target"}
    assert named_modules(page) == {"tsbatch.no_such"} and not module_exists("tsbatch.no_such")
    assert "tsbatch/no_such.py" in named_paths(page)
    commands = named_commands(page)
    assert commands == {"no-such-command", "bench gpu", "serve"}
    assert [words for words in sorted(commands) if command_exists(words)] == ["serve"]


def test_readme_is_a_front_door() -> None:
    assert (REPO_ROOT / "README.md").stat().st_size <= 15 * 1024
