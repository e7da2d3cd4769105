"""``tsbatch apply`` refuses clearly, before any change, when it cannot reach the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbatch.server.apply import main
from tsbatch.server.ports import free_port


def test_a_run_dir_without_a_server_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "resnet18", "--batch-size", "4", "--run-dir", str(tmp_path)]) == 1
    assert "--run-dir" in capsys.readouterr().err


def test_a_server_that_does_not_answer_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory left by a server that has stopped: nothing listens on its port."""
    port = free_port()
    (tmp_path / "config.properties").write_text(
        f"management_address=http://127.0.0.1:{port}\nmodel_store={tmp_path}\n"
    )
    (tmp_path / "key_file.json").write_text(
        json.dumps({"management": {"key": "k"}, "inference": {"key": "k"}})
    )
    assert (
        main(["--model", "resnet18", "--batch-size", "4", "--run-dir", str(tmp_path), "--timeout", "5"]) == 1
    )
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "tsbatch status" in err
