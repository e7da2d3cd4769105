"""The served-archive benchmark's command line: what it refuses before starting a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.bench import resnet, served_archive


def test_an_unreadable_archive_fails_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.mar").write_text("not a zip")
    assert served_archive.main(["--mar", str(tmp_path / "x.mar"), "--requests", str(tmp_path)]) == 1
    assert "not a readable TorchServe model archive" in capsys.readouterr().err
    # the ResNet benchmark hands --mar over, and refuses --requests without it
    assert resnet.main(["--mar", str(tmp_path / "x.mar")]) == 1
    with pytest.raises(SystemExit):
        resnet.main(["--requests", str(tmp_path)])
    assert "--requests goes with --mar" in capsys.readouterr().err
