"""Build TorchServe frontend plugins from their Java sources: ``plugins/<name>/`` to
``build/plugins/<name>.jar``, the folder config.properties' ``plugins_path`` names.

The plugin SDK ships inside the torchserve wheel's frontend jar, so javac compiles against
that jar and nothing is downloaded (no Maven). A jar is rebuilt only when its sources or
the frontend jar changed. Needs a JDK 17 (``javac``); ``make java`` installs one.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tsbatch.paths import REPO_ROOT

PLUGINS_SOURCE = REPO_ROOT / "plugins"
PLUGINS_DIR = REPO_ROOT / "build" / "plugins"
STAMP_ENTRY = "META-INF/tsbatch-source.sha256"
# A fixed timestamp, so the same sources give the same jar.
ZIP_TIME = (2024, 1, 1, 0, 0, 0)


class PluginBuildError(RuntimeError):
    """javac is missing or the sources did not compile."""


def frontend_jar() -> Path:
    """TorchServe's frontend jar in the installed torchserve package."""
    spec = importlib.util.find_spec("ts")
    if spec is None or not spec.submodule_search_locations:
        raise PluginBuildError("the torchserve package is not installed (run `make install`)")
    jars = sorted((Path(next(iter(spec.submodule_search_locations))) / "frontend").glob("*.jar"))
    if not jars:
        raise PluginBuildError("the torchserve package has no frontend jar")
    return jars[0]


def source_digest(source: Path, classpath: Path) -> str:
    digest = hashlib.sha256(classpath.name.encode() + str(classpath.stat().st_size).encode())
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(source)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def built_digest(jar: Path) -> str | None:
    if not jar.exists():
        return None
    try:
        with zipfile.ZipFile(jar) as archive:
            return archive.read(STAMP_ENTRY).decode().strip()
    except (zipfile.BadZipFile, KeyError):
        return None


def build_plugin(source: Path, output_dir: Path = PLUGINS_DIR) -> Path:
    """``source`` (``src/`` Java, ``resources/`` as is) compiled into ``<output_dir>/<name>.jar``."""
    classpath = frontend_jar()
    jar = output_dir / f"{source.name}.jar"
    digest = source_digest(source, classpath)
    if built_digest(jar) == digest:
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise PluginBuildError("javac not found: a JDK 17 is needed to build the plugins (run `make java`)")
    sources = sorted(str(p) for p in (source / "src").rglob("*.java"))
    with tempfile.TemporaryDirectory(prefix=f"plugin-{source.name}-") as workdir:
        classes = Path(workdir)
        command = [javac, "--release", "17", "-nowarn", "-cp", str(classpath), "-d", str(classes), *sources]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise PluginBuildError(f"javac failed for {source.name}:\n{result.stdout}{result.stderr}")
        output_dir.mkdir(parents=True, exist_ok=True)
        partial = jar.with_suffix(".jar.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for root in (classes, source / "resources"):
                for path in sorted(p for p in root.rglob("*") if p.is_file()):
                    archive.writestr(
                        zipfile.ZipInfo(str(path.relative_to(root)), ZIP_TIME), path.read_bytes()
                    )
            archive.writestr(zipfile.ZipInfo(STAMP_ENTRY, ZIP_TIME), digest + "\n")
        partial.replace(jar)
    print(f"[plugins] {jar}")
    return jar


def build_all(output_dir: Path = PLUGINS_DIR) -> list[Path]:
    return [
        build_plugin(source, output_dir) for source in sorted(PLUGINS_SOURCE.iterdir()) if source.is_dir()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compile the TorchServe frontend plugins in plugins/ into build/plugins/*.jar "
        "(needs a JDK 17; nothing is downloaded)."
    )
    parser.add_argument("--output-dir", type=Path, default=PLUGINS_DIR)
    args = parser.parse_args(argv)
    try:
        build_all(args.output_dir)
    except PluginBuildError as exc:
        print(f"[plugins] FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
