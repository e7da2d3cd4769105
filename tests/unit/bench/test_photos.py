"""The photo benchmark's arithmetic: the server's CPU, the decode-bound limit, the ratios."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tsbatch.bench.photos import Row, group_cpu_seconds, main, median_row, print_table

# A child in a session of its own: a test process's own group holds its neighbours too (xdist).
BURNER = """
import time
deadline = time.process_time() + 0.3
while time.process_time() < deadline:
    pass
print(time.process_time(), flush=True)
time.sleep(60)
"""


def test_group_cpu_seconds_counts_a_process_group() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURNER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        burned = float(child.stdout.readline())  # the child's own CPU seconds, startup included
        assert burned >= 0.3
        assert group_cpu_seconds(child.pid) == pytest.approx(burned, abs=0.05)
    finally:
        child.kill()
        child.wait()


def test_table_states_the_decode_bound_limit_and_the_stock_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        Row("4032x3024", "off", "auto", 16.0, 900, 1200, 0, 160, 1.06),
        Row("4032x3024", "on", "auto", 90.0, 150, 300, 0, 900, 1.95),
        Row("4032x3024", "stock", "-", 8.0, 1800, 2500, 0, 80, 1.9),
    ]
    print_table(rows, {("4032x3024", "off"): 100.0, ("4032x3024", "on"): 18.0}, 2, "layout")
    lines = capsys.readouterr().out.splitlines()
    off, on, stock = (
        next(line for line in lines if line.split()[1:2] == [name]) for name in ("off", "on", "stock")
    )
    assert off.split()[-3:] == ["20", "80%", "2.00x"]  # 2 cores / 100 ms = 20 req/s
    assert on.split()[-3:] == ["111", "81%", "11.25x"]
    assert stock.split()[-3:] == ["-", "-", "-"]


def test_further_decode_pools_are_rows_of_their_own_with_their_ratio_to_the_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        Row("1920x1080", "on", "auto", 150.0, 90, 200, 0, 900, 1.9),
        Row("1920x1080", "on", 1, 75.0, 180, 400, 0, 450, 1.0),
    ]
    print_table(rows, {}, 2, "layout")
    out = capsys.readouterr().out
    assert "1920x1080 on: decodeThreads 1 / auto = 0.50" in out
    assert [line.split()[2] for line in out.splitlines() if line.startswith("1920x1080")] == ["auto", "1"]


def test_rounds_keep_the_median_and_every_error() -> None:
    rounds = [
        Row("224x224", "on", "auto", rps, 60, 90, errors, 100, 1.0)
        for rps, errors in ((9, 1), (3, 0), (5, 2))
    ]
    assert (median_row(rounds).rps, median_row(rounds).errors) == (5, 3)


def test_unknown_modes_and_pools_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for wrong in (["--modes", "half"], ["--decode-threads", "0"]):
        with pytest.raises(SystemExit):
            main(wrong)
    assert "--modes takes off, on" in capsys.readouterr().err


def test_unknown_sizes_are_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--sizes", "1x1"])
    assert "unknown sizes ['1x1']" in capsys.readouterr().err
