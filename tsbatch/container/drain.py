"""Run TorchServe as the container's main process and drain it on SIGTERM.

What a stop must not do is signal the Python workers directly (``tini -g`` did: each
worker died with its batch in flight, answered 507). On SIGTERM this supervisor instead

1. marks the pod as draining (``deploy/probe.py ready`` fails from then on, so Kubernetes
   takes the pod out of the Service; a ``preStop`` hook may have done this already),
2. waits until ``drain_seconds`` have passed since the mark, so that requests already
   routed here arrive and are served while new ones go elsewhere,
3. then stops TorchServe's Java frontend the way ``torchserve --stop`` does (SIGTERM to the
   frontend only; it stops its workers), and SIGKILLs whatever is left after
   ``stop_timeout``.

The whole sequence must fit in the pod's ``terminationGracePeriodSeconds``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tsbatch.container import drain_file, drain_seconds, mark_draining
from tsbatch.server.process_group import stop_process_group


@dataclass(frozen=True)
class DrainSettings:
    drain_file: Path
    drain_seconds: float
    stop_timeout: float = 30.0

    @classmethod
    def from_environment(cls) -> DrainSettings:
        return cls(drain_file=drain_file(), drain_seconds=drain_seconds())


def stop_frontend(launcher: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the Java frontend, as `torchserve --stop` does, and kill what is left after
    ``timeout`` (``tsbatch.server.process_group``, which every toolkit stop uses)."""
    if not stop_process_group(launcher.pid, timeout, launcher):
        print(f"[start] TorchServe was still running {timeout:.0f}s after SIGTERM: killed it", flush=True)
    launcher.wait()


def supervise(command: list[str], settings: DrainSettings) -> int:
    """Run ``command`` in its own process group; drain and stop it on SIGTERM/SIGINT."""
    settings.drain_file.unlink(missing_ok=True)
    stopping = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    launcher = subprocess.Popen(command, start_new_session=True)
    while launcher.poll() is None and not stopping.wait(0.5):
        pass
    if launcher.poll() is not None:
        return launcher.returncode  # TorchServe ended on its own: the container ends with it
    began = mark_draining(settings.drain_file)
    remaining = began + settings.drain_seconds - time.time()
    print(f"[start] SIGTERM: draining for {max(remaining, 0):.1f}s before stopping TorchServe", flush=True)
    while remaining > 0 and launcher.poll() is None:
        time.sleep(min(remaining, 0.5))
        remaining = began + settings.drain_seconds - time.time()
    if launcher.poll() is None:
        stop_frontend(launcher, settings.stop_timeout)
    print(f"[start] TorchServe stopped (exit {launcher.returncode})", flush=True)
    sys.stdout.flush()
    return 0
