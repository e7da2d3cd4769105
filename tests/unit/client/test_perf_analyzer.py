"""The --input-data file perf_analyzer is given, and where the binary is looked for."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from batchkit.binary_tensors import bytes_elements
from batchkit.errors import InvalidInput
from tsbatch.client import perf_analyzer


def test_input_data_holds_the_serialized_bytes_tensor_the_server_reads_back() -> None:
    body = b"\xff\xd8\xff\xe0 a JPEG's first bytes"
    document = perf_analyzer.input_data("image", body)
    serialized = base64.b64decode(document["data"][0]["image"]["b64"])  # type: ignore[index]
    assert list(bytes_elements(serialized, 1, "image", InvalidInput)) == [body]


def test_the_file_alone_is_refused_with_the_serialized_form_named() -> None:
    with pytest.raises(InvalidInput, match="4-byte little-endian length"):
        list(bytes_elements(b"\xff\xd8\xff\xe0 a JPEG's first bytes", 1, "image", InvalidInput))


def test_the_installed_wrapper_wins_over_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    installed = tmp_path / "perf_analyzer"
    monkeypatch.setattr(perf_analyzer, "INSTALLED", installed)
    monkeypatch.setattr(perf_analyzer.shutil, "which", lambda name: None)
    assert perf_analyzer.find_perf_analyzer() is None
    with pytest.raises(perf_analyzer.PerfAnalyzerError, match="make perf-analyzer"):
        perf_analyzer.run("127.0.0.1:1", "m", b"x", "text", None)
    installed.write_text("#!/bin/sh\n")
    assert perf_analyzer.find_perf_analyzer() == installed
