"""Where defaults resolve: the checkout of an editable install, else the project around the
working directory (a plain `pip install .` used from a checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.paths import MANIFEST_NAME, REPO_ROOT, project_root


def test_an_editable_install_resolves_to_its_checkout() -> None:
    assert (REPO_ROOT / MANIFEST_NAME).is_file()
    assert project_root(REPO_ROOT / "tsbatch") == REPO_ROOT


def test_an_installed_package_resolves_to_the_project_around_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "venv" / "lib" / "site-packages" / "tsbatch"
    package.mkdir(parents=True)
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / MANIFEST_NAME).write_text("models: {}\n")
    monkeypatch.chdir(project / "docs")
    assert project_root(package) == project.resolve()
    monkeypatch.chdir(tmp_path)  # no project around: the working directory itself
    assert project_root(package) == tmp_path.resolve()
