"""One ``tsbatch apply`` at a time per server: an exclusive lock on ``<run dir>/apply.lock``.

Two applies at once each stage a version and unregister the other's, and leave the server
with two half-done changes. The lock is the kernel's (``flock``): a holder that dies releases
it, so a stale file never blocks; the file keeps the holder's pid, command and start time so
the one refused can say who holds it, and the next holder can say whose apply stopped midway.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

LOCK_NAME = "apply.lock"
POLL_S = 0.2


class ApplyLocked(RuntimeError):
    """Another apply holds the server; the message says which (pid, command, since when)."""


def holder_text(holder: dict[str, Any]) -> str:
    if not holder:
        return "an apply whose details are not written yet"
    since = time.strftime("%H:%M:%S", time.localtime(float(holder.get("started", 0))))
    return f"pid {holder.get('pid')} on {holder.get('host')} since {since} ({holder.get('command')})"


def _read_holder(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _current_holder(handle: IO[str], patience_s: float = 2.0) -> dict[str, Any]:
    """The record of the apply holding the lock now: it writes it just after taking the lock,
    so until then the file holds nothing or the last holder's finished record; wait for it."""
    deadline = time.monotonic() + patience_s
    while True:
        holder = _read_holder(handle)
        if (holder and not holder.get("finished", True)) or time.monotonic() >= deadline:
            return holder if not holder.get("finished", True) else {}
        time.sleep(POLL_S / 4)


@contextmanager
def apply_lock(run_dir: Path, wait_s: float = 0) -> Iterator[dict[str, Any]]:
    """Hold the server's apply lock for the block; yields the previous holder's record (``{}``
    when none, or when it finished cleanly). Waits up to ``wait_s`` for another apply to
    finish, then raises :class:`ApplyLocked` saying who holds it."""
    path = run_dir / LOCK_NAME
    with path.open("a+") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ApplyLocked(
                        f"another apply holds {path}: {holder_text(_current_holder(handle))}; wait for it "
                        "(or pass --wait SECONDS)"
                    ) from None
                time.sleep(POLL_S)
        previous = _read_holder(handle)
        mine = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "command": " ".join(sys.argv) or "python",
            "finished": False,
        }
        _write(handle, mine)
        try:
            yield {} if previous.get("finished", True) else previous
        finally:
            _write(handle, {**mine, "finished": True})
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write(handle: IO[str], record: dict[str, Any]) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(record) + "\n")
    handle.flush()
