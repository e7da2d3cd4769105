"""The sweep's command line: an archive it cannot run in process is refused, pointing at tune."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tsbatch.analysis.sweep.cli import in_process_swept_model, main


def test_a_foreign_archive_exits_2_and_points_at_tune(
    make_mar: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = make_mar("stock.mar", {"batchSize": 4})
    assert main(["--mar", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert "was not built by this toolkit" in err and f"tsbatch tune --mar {foreign} --requests PATH" in err
    # the toolkit's own archive names its manifest model; a stranger under a known name does not pass
    assert in_process_swept_model(make_mar("own.mar", {}, model="resnet18", toolkit=True)) == "resnet18"
    with pytest.raises(ValueError, match="not built by this toolkit"):
        in_process_swept_model(make_mar("fake.mar", {}, model="resnet18"))
