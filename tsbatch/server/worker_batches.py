"""Which workers of a model version are computing a batch, as TorchServe's frontend logs it.

TorchServe 0.12 reports no per-worker activity through its APIs: describe shows a computing
worker as READY, and the queue count drops as soon as a worker takes its batch. Each worker
thread of the frontend does log both ends of every batch, at INFO in ``logs/ts_log.log``
under its own name (``W-<port>-<model>_<version>``): "Looping backend response at" once the
batch is sent to the worker process, "Backend response time" once its answers are handed to
the clients' connections. A worker whose last such line is the first is computing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SENT = "Looping backend response at"
ANSWERED = "Backend response time"
# How far back the log is read for the workers' state before apply began following it.
HISTORY_BYTES = 8 * 2**20


def worker_line(model: str, version: str) -> re.Pattern[str]:
    """One batch end of one worker thread of ``model`` ``version`` (its port is the worker id)."""
    thread = rf"W-(?P<worker>\d+)-{re.escape(model)}_{re.escape(version)}"
    return re.compile(rf"\s{thread}\s+\S*WorkerThread - (?P<event>{SENT}|{ANSWERED})")


def busy_workers(
    text: str, model: str, version: str, known: dict[str, bool] | None = None
) -> dict[str, bool]:
    """Each worker id seen in ``text`` -> whether its last batch is still computing, starting
    from ``known`` (the state before ``text``)."""
    states = dict(known or {})
    pattern = worker_line(model, version)
    for line in text.splitlines():
        match = pattern.search(line)
        if match is not None:
            states[match["worker"]] = match["event"] == SENT
    return states


@dataclass
class BatchLog:
    """Follows ``ts_log.log`` from where it ends now (the recent past read once for the state
    of workers quiet since); a rotated or truncated file is read again from its start."""

    path: Path
    model: str
    version: str
    offset: int = 0
    states: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def following(
        cls, path: Path, model: str, version: str, workers: list[str] | tuple[str, ...] = ()
    ) -> BatchLog:
        """From the end of the log on; the state of ``workers`` before it is read from the
        recent past, going further back (up to the whole file) until each has been seen."""
        log = cls(path, model, version)
        if not path.exists():
            return log
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            window = HISTORY_BYTES
            while True:
                start = max(0, size - window)
                handle.seek(start)
                history = handle.read(size - start)
                whole = history[: history.rfind(b"\n") + 1]
                log.offset = start + len(whole)
                log.states = busy_workers(whole.decode(errors="replace"), model, version)
                if start == 0 or not log.unseen(list(workers)):
                    return log
                window *= 8

    def read(self) -> dict[str, bool]:
        """Each worker id seen so far -> whether it is computing a batch now."""
        if not self.path.exists():
            return self.states
        with self.path.open("rb") as handle:
            size = handle.seek(0, 2)
            if size < self.offset:  # rotated: the new file holds only what came since
                self.offset = 0
            handle.seek(self.offset)
            chunk = handle.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        self.states = busy_workers(whole.decode(errors="replace"), self.model, self.version, self.states)
        return self.states

    def computing(self, workers: list[str]) -> list[str]:
        """Of ``workers`` (ids from describe), those computing a batch, or whose state the log
        does not show (never seen: its lines rotated away, or the log level hides INFO)."""
        states = self.read()
        return [worker for worker in workers if states.get(worker, True)]

    def unseen(self, workers: list[str]) -> list[str]:
        return [worker for worker in workers if worker not in self.states]
