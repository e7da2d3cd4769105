"""Every path, make target, `tsbatch` command and Python module the README, docs/ and the code's
own prose name exists.

Docs drift silently (a moved module, a folder that never existed); this reads the code
spans, code blocks and links of README.md and docs/*.md, and the docstrings and comments
of the source and tests, and checks each name against the repository, so a rename that
forgets the prose fails here.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from pathlib import Path

import pytest

from tsbatch.cli.commands import COMMANDS
from tsbatch.paths import HANDLERS_DIR, REPO_ROOT

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
    # A group alone (`tsbatch bench --help`) lists its commands.
    return not command.subcommands or not target or target in {t.name for t in command.subcommands}


def named_modules(page: Path) -> set[str]:
    return {
        module
        for code in code_texts(page.read_text())
        for module in re.findall(r"python3? -m ([A-Za-z_][\w.]*)", code)
    }


def module_file(module: str) -> Path | None:
    """The file of a module of this repository; handlers/ is an import root of its own (batchkit)."""
    for root in (REPO_ROOT, HANDLERS_DIR):
        path = root / module.replace(".", "/")
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def module_exists(module: str) -> bool:
    if module_file(module):
        return True
    own = ("tsbatch", "batchkit", "image_serving", "text_serving", "scripts", "deploy", "loadtest")
    if module.split(".")[0] in (*own, "handlers", "tests"):
        return False
    return importlib.util.find_spec(module) is not None


def make_targets() -> set[str]:
    """The Makefile's targets; its ``bench-%`` rule makes one per ``tsbatch bench`` command."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-zA-Z][\w-]*):", makefile, re.M))
    if re.search(r"^bench-%:", makefile, re.M):
        targets |= {f"bench-{sub.name}" for sub in COMMANDS["bench"].subcommands}
    return targets


def test_every_benchmark_has_its_make_target() -> None:
    """`make bench-<name>` for each `tsbatch bench <name>`, and no make target a `tsbatch bench` lacks."""
    benches = {f"bench-{sub.name}" for sub in COMMANDS["bench"].subcommands}
    assert {"bench-intent", "bench-photos", "bench-clients"} <= benches <= make_targets()
    assert {target for target in make_targets() if target.startswith("bench-")} <= benches


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


# The code's prose: docstrings and comments of these folders name modules two ways, dotted
# under the project's own import roots, or as a relative path to a .py file.
PROSE_DIRS = ("handlers", "tsbatch", "tests", "scripts", "deploy")
DOTTED_NAME = re.compile(
    r"(?<![\w./-])((?:tsbatch|batchkit|image_serving|text_serving|deploy|scripts)(?:\.[A-Za-z_]\w*)+)"
)
PY_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w-]+\.py)\b")


def prose(source: str) -> list[str]:
    """The docstrings (module, class, function) and comments of one source file."""
    docstrings = [
        docstring
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and (docstring := ast.get_docstring(node, clean=False))
    ]
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return docstrings + [token.string for token in tokens if token.type == tokenize.COMMENT]


def top_level_names(path: Path) -> set[str]:
    """What ``from module import name`` finds: the module's definitions, assignments and imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def dotted_name_exists(name: str) -> bool:
    """A module, or an attribute of one: the longest module prefix must exist and, when
    something follows it, define that next name (``image_serving.images.decode_pixels``)."""
    parts = name.split(".")
    for length in range(len(parts), 0, -1):
        if path := module_file(".".join(parts[:length])):
            return length == len(parts) or parts[length] in top_level_names(path)
    return False


def stale_names(path: Path) -> list[str]:
    """The module names and .py paths in ``path``'s prose that resolve to nothing here."""
    missing = set()
    for text in prose(path.read_text()):
        missing.update(name for name in DOTTED_NAME.findall(text) if not dotted_name_exists(name))
        missing.update(
            named
            for named in PY_PATH.findall(text)
            if not any((root / named).is_file() for root in (REPO_ROOT, HANDLERS_DIR))
        )
    return sorted(missing)


def test_modules_named_in_docstrings_and_comments_exist() -> None:
    stale = {
        str(path.relative_to(REPO_ROOT)): names
        for folder in PROSE_DIRS
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if (names := stale_names(path))
    }
    assert not stale, f"docstrings or comments name modules that do not exist: {stale}"


def test_the_prose_checker_sees_a_stale_name(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        '"""Built by ``tsbatch.archive.compiled`` with ``image_serving.images.decode_pixels``, not\n'
        '``tsbatch.bench.variants`` nor ``image_serving.images.no_such``; see deploy/container_config.py."""\n'
        "# tsbatch/archive/gone.py is stale, batchkit/config.py is not; /app/deploy/start.py is the image's.\n"
    )
    stale = ["image_serving.images.no_such", "tsbatch.bench.variants", "tsbatch/archive/gone.py"]
    assert stale_names(source) == stale


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
