"""A TorchServe launcher's process group: its pid file, and stopping the group.

The launcher (``torchserve --foreground``) runs the Java frontend, which runs the Python
workers; all three share the group the launcher was started in. The frontend is stopped
first and alone: it then stops its own workers. SIGTERM to the whole group kills the workers
before the frontend knows it is stopping, so it starts a fresh worker for each (a second of
CPU spent importing torch) while it shuts down, and the launcher, dead first, leaves the
frontend a zombie that only init reaps (measured: 4.0 s to an empty group, against 2.6 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

POLL_S = 0.1


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _reap(pid: int, process: subprocess.Popen[bytes] | None) -> None:
    """Collect the launcher's exit status if it is our child, so it stops being a zombie."""
    if process is not None:
        process.poll()
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _running(processes: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Those still running: exited ones that no one has reaped yet (zombies) do not count."""
    running = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
    return running


def _group(group: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(process.pid) == group:
                members.append(process)
    return members


def _gone(
    pid: int, process: subprocess.Popen[bytes] | None, processes: list[psutil.Process] | None, group: int
) -> bool:
    """Whether ``processes`` (None: the whole group) have exited."""
    _reap(pid, process)
    if processes is not None:
        return not _running(processes)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return not _running(_group(group))


def _wait_until_gone(
    pid: int,
    process: subprocess.Popen[bytes] | None,
    processes: list[psutil.Process] | None,
    group: int,
    seconds: float,
) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid, process, processes, group):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def stop_process_group(pid: int, timeout: float = 30, process: subprocess.Popen[bytes] | None = None) -> bool:
    """Stop launcher ``pid``'s group: SIGTERM to its frontend (``timeout`` seconds to stop its
    workers and exit), then SIGTERM and SIGKILL to whatever of the group is left (5 s each).

    When we started the launcher ourselves it is reaped here (``process``): an unreaped
    zombie would count as a member of the group. Returns whether the first SIGTERM was
    enough within ``timeout`` (False: the rest had to be signalled or killed).
    """
    try:
        group = os.getpgid(pid)
        frontend = psutil.Process(pid).children()
    except (ProcessLookupError, psutil.NoSuchProcess):
        return True
    # (whom, signal, seconds to exit), None being the whole group; without a frontend (it
    # died, or the launcher has not started it yet) the group's first SIGTERM gets its time.
    steps: list[tuple[list[psutil.Process] | None, signal.Signals, float]] = [
        (frontend, signal.SIGTERM, timeout),
        (None, signal.SIGTERM, 5),
        (None, signal.SIGKILL, 5),
    ]
    if not frontend:
        steps = [(None, signal.SIGTERM, timeout), steps[2]]
    graceful = True
    for step, (processes, sig, seconds) in enumerate(steps):
        if processes is None:
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                return graceful
        else:
            for member in processes:
                with contextlib.suppress(psutil.NoSuchProcess):
                    member.send_signal(sig)
        if _wait_until_gone(pid, process, processes, group, seconds):
            if processes is None:
                return graceful
        elif step == 0:
            graceful = False
    return graceful
