"""Stopping a launcher's process group: the frontend first, so it stops its own workers and
none is signalled behind its back (TorchServe's frontend replaces a worker that dies under
it); a frontend that ignores SIGTERM is killed; the launcher is reaped."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tsbatch.server.process_group import read_pid, stop_process_group

# launcher -> frontend -> worker, as torchserve -> java -> python. The worker writes who
# stopped it; the frontend, on SIGTERM, stops its worker itself (unless told to ignore it).
WORKER = """
import pathlib, signal, sys, time
def stopped(*_):
    pathlib.Path(sys.argv[1]).write_text("signalled directly")
    sys.exit(0)
signal.signal(signal.SIGTERM, stopped)
signal.signal(signal.SIGUSR1, lambda *_: (pathlib.Path(sys.argv[1]).write_text("stopped by its frontend"), sys.exit(0)))
time.sleep(60)
"""
FRONTEND = """
import signal, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
def stop(*_):
    worker.send_signal(signal.SIGUSR1)
    worker.wait()
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[3] == "ignore" else stop)
time.sleep(60)
"""
LAUNCHER = """
import subprocess, sys
sys.exit(subprocess.call([sys.executable, "-c", *sys.argv[1:]]))
"""


def start_group(tmp_path: Path, on_term: str) -> tuple[subprocess.Popen[bytes], Path]:
    outcome = tmp_path / "worker.txt"
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, FRONTEND, WORKER, str(outcome), on_term], start_new_session=True
    )
    deadline = time.monotonic() + 20
    while len(psutil.Process(launcher.pid).children(recursive=True)) < 2:  # the worker is up
        assert time.monotonic() < deadline, "the fake server did not start"
        time.sleep(0.05)
    time.sleep(0.3)  # its signal handlers are installed
    return launcher, outcome


def group_members(group: int) -> list[int]:
    members = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == group:
                members.append(process.pid)
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
    return members


def test_the_frontend_stops_its_own_workers_and_the_launcher_is_reaped(tmp_path: Path) -> None:
    launcher, outcome = start_group(tmp_path, "stop")
    started = time.monotonic()
    assert stop_process_group(launcher.pid, timeout=10, process=launcher) is True
    assert outcome.read_text() == "stopped by its frontend"
    assert launcher.returncode == 0 and group_members(launcher.pid) == []
    assert time.monotonic() - started < 5


def test_a_frontend_that_ignores_sigterm_is_killed_after_the_timeout(tmp_path: Path) -> None:
    launcher, outcome = start_group(tmp_path, "ignore")
    started = time.monotonic()
    assert stop_process_group(launcher.pid, timeout=1, process=launcher) is False
    assert group_members(launcher.pid) == [] and launcher.returncode is not None
    assert outcome.read_text() == "signalled directly"  # the group's SIGTERM, after the frontend's time
    assert 1 <= time.monotonic() - started < 10


def test_a_pid_file_gives_its_pid_or_none(tmp_path: Path) -> None:
    (tmp_path / "launcher.pid").write_text("123\n")
    (tmp_path / "broken.pid").write_text("not a pid")
    assert read_pid(tmp_path / "launcher.pid") == 123
    assert read_pid(tmp_path / "broken.pid") is None and read_pid(tmp_path / "missing.pid") is None
