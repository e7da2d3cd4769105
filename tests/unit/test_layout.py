"""The rules the layout promises (docs/architecture.md), checked on the source itself.

Imports are read with ``ast`` (nothing is imported), so a rule broken in a module that no
test imports still fails here.
"""

from __future__ import annotations

import ast
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tsbatch.paths import HANDLERS_DIR, REPO_ROOT

MAX_MODULE_LINES = 400
SOURCE_DIRS = ("tsbatch", "handlers", "scripts", "loadtest", "deploy")
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"


def source_files() -> Iterator[Path]:
    for folder in SOURCE_DIRS:
        yield from sorted((REPO_ROOT / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    """The import name: handlers/ is an import root of its own (batchkit, the handler modules)."""
    root = HANDLERS_DIR if path.is_relative_to(HANDLERS_DIR) else REPO_ROOT
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every module of ``known`` that ``path`` imports, TYPE_CHECKING blocks and function bodies included."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".strip(".")
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in source_files()}
    known = set(paths)
    return {name: imported_modules(path, known) - {name} for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None. A package's own ``__init__`` is its parent,
    not a cycle, so edges from a module to the packages that contain it are left out."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if node.startswith(f"{target}."):
                continue
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_there_is_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The imports between tsbatch's first-level packages (and top-level modules): one package
    imports another when any module under the one imports any module under the other."""

    def package(module: str) -> str | None:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == "tsbatch" and len(parts) > 1 else None

    packages: dict[str, set[str]] = {}
    for module, imports in graph.items():
        if (source := package(module)) is not None:
            targets = {target for name in imports if (target := package(name)) not in (None, source)}
            packages.setdefault(source, set()).update(targets)
    return packages


def test_no_package_imports_one_that_imports_it_back() -> None:
    """The core as layers: a package cycle (client -> sla -> client) fails even where no two
    modules import each other, function bodies included."""
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "package cycle: " + " -> ".join(cycle or [])


def test_the_package_cycle_finder_sees_an_import_inside_a_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    sources = {
        "tsbatch/sla/server.py": "def rise():\n    from tsbatch.client.metrics import counter_rise\n",
        "tsbatch/client/metrics.py": "from tsbatch.sla.gate import Window\n",
        "tsbatch/sla/gate.py": "",
    }
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    paths = {module_name(tmp_path / name): tmp_path / name for name in sources}
    graph = {name: imported_modules(path, set(paths)) for name, path in paths.items()}
    assert find_cycle(graph) is None, "no module cycle"
    assert find_cycle(package_graph(graph)) == ["tsbatch.client", "tsbatch.sla", "tsbatch.client"]


# The layers, lowest first: a module imports only from its own layer or those below it. The
# batch core runs inside TorchServe; the toolkit's core knows no model kind; each kind builds
# on the core (found through the tsbatch.kinds entry points); the commands put them together.
LAYERS = ("batchkit", "core", "kinds", "commands")
CORE_PACKAGES = ("archive", "config", "configcheck", "server", "client", "sla", "workloads", "analysis", "locust", "container")  # fmt: skip
COMMAND_PACKAGES = ("cli", "bench", "gpucheck", "__main__")
# The import lines the core must not have, even inside a function (issue 31's grep).
KIND_IMPORT = re.compile(r"^\s*(from|import) tsbatch\.kinds", re.MULTILINE)


def layer_of(module: str) -> str | None:
    """The layer of a module of handlers/ or tsbatch/ (None for the other folders' scripts)."""
    parts = module.split(".")
    if parts[0] != "tsbatch":
        in_handlers = (HANDLERS_DIR / f"{parts[0]}.py").exists() or (HANDLERS_DIR / parts[0]).is_dir()
        return "batchkit" if in_handlers else None
    if len(parts) == 1:
        return "core"
    if parts[1] == "kinds":
        return "kinds"
    if parts[1] in COMMAND_PACKAGES:
        return "commands"
    return "core"


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module from a higher layer, as ``importer (layer) -> imported (layer)``."""
    found = []
    for module, imports in sorted(graph.items()):
        layer = layer_of(module)
        if layer is None:
            continue
        for target in sorted(imports):
            target_layer = layer_of(target)
            if target_layer is not None and LAYERS.index(target_layer) > LAYERS.index(layer):
                found.append(f"{module} ({layer}) -> {target} ({target_layer})")
    return found


def test_each_layer_imports_only_the_layers_below_it() -> None:
    violations = layer_violations(import_graph())
    assert not violations, "imports against the layers (docs/architecture.md):\n" + "\n".join(violations)


def test_the_layer_checker_sees_an_import_upwards() -> None:
    graph = {
        "tsbatch.archive.pipeline": {"tsbatch.kinds.image.export", "tsbatch.paths", "batchkit.config"},
        "tsbatch.kinds.image.kind": {"tsbatch.archive.kind", "tsbatch.cli.main"},
        "tsbatch.bench.resnet": {"tsbatch.kinds.image.export", "resnet_handler"},
        "batchkit.worker": {"tsbatch.paths"},
    }
    assert layer_violations(graph) == [
        "batchkit.worker (batchkit) -> tsbatch.paths (core)",
        "tsbatch.archive.pipeline (core) -> tsbatch.kinds.image.export (kinds)",
        "tsbatch.kinds.image.kind (kinds) -> tsbatch.cli.main (commands)",
    ]


def kind_modules_imported_by_batchkit(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a kind's worker package or handler module by batchkit, the part every kind shares."""
    kinds = {path.name for path in HANDLERS_DIR.iterdir() if (path / "__init__.py").exists()} - {"batchkit"}
    kinds |= {path.stem for path in HANDLERS_DIR.glob("*.py")}
    return [
        f"{module} -> {target}"
        for module, imports in sorted(graph.items())
        if module.split(".")[0] == "batchkit"
        for target in sorted(imports)
        if target.split(".")[0] in kinds
    ]


def test_the_batch_core_imports_no_kind() -> None:
    leaks = kind_modules_imported_by_batchkit(import_graph())
    assert not leaks, (
        "batchkit imports a kind's module (it belongs beside that kind's handler):\n" + "\n".join(leaks)
    )
    planted = {"batchkit.loader": {"image_serving.images", "batchkit.errors"}}
    assert kind_modules_imported_by_batchkit(planted) == ["batchkit.loader -> image_serving.images"]


def test_no_handlers_module_shadows_a_torchserve_stock_handler() -> None:
    """TorchServe resolves an archive's bare handler name (``image_classifier``) by importing
    it, so a module or package of that name under handlers/ (installed with the toolkit, and
    staged into archives) would win over the stock handler and break every archive using it."""
    import ts.torch_handler

    stock = {module.name for module in pkgutil.iter_modules(ts.torch_handler.__path__)}
    ours = {path.stem for path in HANDLERS_DIR.glob("*.py")}
    ours |= {path.name for path in HANDLERS_DIR.iterdir() if (path / "__init__.py").exists()}
    assert {"image_classifier", "text_classifier"} <= stock
    assert not ours & stock, f"handlers/ names TorchServe's stock handlers: {sorted(ours & stock)}"


def test_the_core_has_no_kind_import_line() -> None:
    """What ``grep -rnE '^\\s*(from|import) tsbatch\\.kinds'`` over the core's folders finds: nothing."""
    found = [
        f"{path.relative_to(REPO_ROOT)}: {match.group(0).strip()}"
        for package in CORE_PACKAGES
        for path in sorted((REPO_ROOT / "tsbatch" / package).rglob("*.py"))
        for match in KIND_IMPORT.finditer(path.read_text())
    ]
    assert not found, "the core imports a kind:\n" + "\n".join(found)
    assert KIND_IMPORT.search("def f():\n    from tsbatch.kinds.image import export\n")


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"pkg.mod": {"pkg"}, "pkg": set()}) is None


def test_handlers_never_import_the_toolkit() -> None:
    """What goes into a .mar must run inside TorchServe without the toolkit installed."""
    known = {module_name(path) for path in source_files()}
    leaks = {
        str(path.relative_to(REPO_ROOT)): sorted(
            name
            for name in imported_modules(path, known)
            if name.split(".")[0] in ("tsbatch", "scripts", "deploy")
        )
        for path in HANDLERS_DIR.rglob("*.py")
    }
    assert not {path: names for path, names in leaks.items() if names}


@pytest.mark.parametrize("path", list(source_files()), ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_module_is_short_and_leaves_sys_path_alone(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES, (
        f"{path.name} is over {MAX_MODULE_LINES} lines: split it"
    )
    assert "sys.path" not in text, "imports resolve through the installed package, not sys.path edits"


def table_rows(page: Path = ARCHITECTURE) -> dict[str, set[str]]:
    """The table of parts: each row's folder (or glob) -> the names its modules cell lists;
    what a parenthesis says about a module (its classes, functions) is not a module."""
    rows = {}
    for line in page.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        modules = cells[2]
        while (bare := re.sub(r"\([^()]*\)", "", modules)) != modules:
            modules = bare
        rows[re.findall(r"`([^`]+)`", cells[0])[0]] = set(re.findall(r"`([^`]+)`", modules))
    return rows


def documented_modules() -> Iterator[Path]:
    """What the table must list: the Python modules of handlers/ and tsbatch/, the plugins' Java classes."""
    for folder in ("handlers", "tsbatch"):
        yield from sorted(path for path in (REPO_ROOT / folder).rglob("*.py") if path.name != "__init__.py")
    yield from sorted((REPO_ROOT / "plugins").rglob("*.java"))


def row_of(path: Path, rows: dict[str, set[str]]) -> str | None:
    """A module's row: its folder's (a plugin's, for the Java classes below it) or a glob that matches it."""
    for row in rows:
        folder = REPO_ROOT / row
        in_folder = path.parent == folder or (path.suffix == ".java" and path.is_relative_to(folder))
        if in_folder if row.endswith("/") else path in REPO_ROOT.glob(row):
            return row
    return None


def listed_name_exists(row: str, name: str) -> bool:
    """A name in a row is a module of its folder, a subfolder (``sweep/``), or a file its glob matches."""
    if not row.endswith("/"):
        return any(path.stem == name for path in REPO_ROOT.glob(row))
    folder = REPO_ROOT / row
    if name.endswith("/"):
        return (folder / name).is_dir()
    return (folder / f"{name}.py").is_file() or any(folder.rglob(f"{name}.java"))


def unlisted_modules(rows: dict[str, set[str]]) -> list[str]:
    missing = []
    for path in documented_modules():
        relative = path.relative_to(REPO_ROOT)
        row = row_of(path, rows)
        if row is None:
            missing.append(f"{relative}: the table has no row `{relative.parent}/`")
        elif path.stem not in rows[row]:
            missing.append(f"`{path.stem}` ({relative}) is missing from the row `{row}`")
    return missing


def test_the_table_of_parts_lists_every_module() -> None:
    missing = unlisted_modules(table_rows())
    assert not missing, "docs/architecture.md, The parts:\n" + "\n".join(missing)


def test_every_module_the_table_names_exists() -> None:
    stale = [
        f"the row `{row}` names `{name}`, which is not there"
        for row, names in table_rows().items()
        for name in sorted(names)
        if not listed_name_exists(row, name)
    ]
    assert not stale, "docs/architecture.md, The parts:\n" + "\n".join(stale)


def test_the_table_checker_sees_a_missing_and_a_stale_module(tmp_path: Path) -> None:
    page = tmp_path / "architecture.md"
    page.write_text(
        "| folder | what it is | modules |\n| --- | --- | --- |\n"
        "| `tsbatch/server/` | running | `process` (`TorchServe`), `ports`, `gone` |\n"
    )
    rows = table_rows(page)
    assert rows == {"tsbatch/server/": {"process", "ports", "gone"}}
    missing = unlisted_modules(rows)
    assert "`served` (tsbatch/server/served.py) is missing from the row `tsbatch/server/`" in missing
    assert "tsbatch/machine.py: the table has no row `tsbatch/`" in missing
    assert listed_name_exists("tsbatch/server/", "ports")
    assert not listed_name_exists("tsbatch/server/", "gone")
