"""Frontend plugins compiled from source against the torchserve wheel's jar (tsbatch/archive/plugins.py)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from tsbatch.archive.plugins import PLUGINS_SOURCE, STAMP_ENTRY, PluginBuildError, build_plugin

SERVICE = "META-INF/services/org.pytorch.serve.servingsdk.ModelServerEndpoint"

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK here (make java installs one)")


def test_the_oip_plugin_compiles_into_a_jar_torchserve_discovers(tmp_path: Path) -> None:
    jar = build_plugin(PLUGINS_SOURCE / "oip", tmp_path)
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
        endpoints = archive.read(SERVICE).decode().split()
    assert endpoints == ["dev.tsbatch.oip.OpenInferenceEndpoint", "dev.tsbatch.oip.KServeV1Endpoint"]
    assert {f"{endpoint.replace('.', '/')}.class" for endpoint in endpoints} <= names
    assert STAMP_ENTRY in names


def test_a_jar_is_rebuilt_only_when_its_sources_change(tmp_path: Path) -> None:
    source = tmp_path / "oip"
    shutil.copytree(PLUGINS_SOURCE / "oip", source)
    jar = build_plugin(source, tmp_path / "out")
    built = jar.stat().st_mtime_ns
    assert build_plugin(source, tmp_path / "out").stat().st_mtime_ns == built
    java = next(source.rglob("ModelPath.java"))
    java.write_text(java.read_text() + "\n// changed\n")
    assert build_plugin(source, tmp_path / "out").stat().st_mtime_ns != built


def test_a_compile_error_names_the_file_and_leaves_no_jar(tmp_path: Path) -> None:
    source = tmp_path / "broken"
    (source / "src" / "x").mkdir(parents=True)
    (source / "src" / "x" / "Broken.java").write_text("package x; class Broken { int f() { return } }\n")
    with pytest.raises(PluginBuildError, match=r"javac failed for broken:[\s\S]*Broken\.java"):
        build_plugin(source, tmp_path / "out")
    assert not (tmp_path / "out" / "broken.jar").exists()


def test_without_javac_the_error_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PluginBuildError, match=r"javac not found.*make java"):
        build_plugin(PLUGINS_SOURCE / "oip", tmp_path / "out")
