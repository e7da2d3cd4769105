"""Why a worker died while loading, read from TorchServe's model log as it is written.

A worker whose handler cannot load (a missing package, a bad file) dies, is restarted with a
back-off, and dies again: the frontend never reports the model READY and says nothing more.
The cause is only in ``logs/model_log.log``, as the worker's Python traceback. Waiting for
READY therefore reads that log too, and stops at the first such death with its last lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# What TorchServe's Python worker logs when loading fails (its model_service_worker module):
# any exception kills the process; RuntimeError and MemoryError are logged and answered 500/507.
DEATH_MARKERS = ("Backend worker process died", "Failed to load model", "cpu OOM", "cuda OOM")
# "<time> [INFO ] W-9000-resnet18_1.0-stdout MODEL_LOG - <message>": one worker's own line.
LINE = re.compile(
    r"\b(?P<worker>W-\d+-(?P<model>.+?)_(?P<version>[^_\s]+))-std(?:out|err)\s+MODEL_LOG - (?P<text>.*)$"
)
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$")
CARETS = re.compile(r"^\s*[~^]+\s*$")


@dataclass(frozen=True)
class WorkerFailure:
    """One worker's death while loading: its model and what it logged, log prefixes stripped."""

    model: str
    lines: tuple[str, ...]

    @property
    def exceptions(self) -> list[str]:
        """The exception lines of the traceback, the first raised first (a chained traceback
        ends with what its handler raised while handling the first: the origin is the first)."""
        return [line for line in self.lines if EXCEPTION_LINE.match(line)]

    @property
    def exception(self) -> str:
        """The first exception line (``ModuleNotFoundError: No module named 'x'``)."""
        found = self.exceptions
        return found[0] if found else self.lines[0]

    @property
    def complete(self) -> bool:
        """Whether the traceback has reached its exception line (the worker flushes it in pieces)."""
        return bool(self.exceptions)

    def origin(self) -> list[str]:
        """The frame that raised the first exception: its ``File ...`` line and its code."""
        if not self.exceptions:
            return []
        before = [line for line in self.lines[: self.lines.index(self.exception)] if not CARETS.match(line)]
        return before[-2:]

    def describe(self) -> str:
        then = [f"  then: {line}" for line in self.exceptions[1:]]
        return "\n".join(
            [f"a worker of {self.model} died while loading: {self.exception}", *self.origin(), *then]
        )


def worker_failures(text: str) -> list[WorkerFailure]:
    """Every load-time death in a piece of model log, in order, each with the lines that
    worker logged after it (workers of one model write their tracebacks interleaved)."""
    failures: list[tuple[str, list[str]]] = []
    open_failure: dict[str, list[str]] = {}  # worker -> the lines of its latest death
    for raw in text.splitlines():
        match = LINE.search(raw)
        if match is None:
            continue
        worker, message = match["worker"], match["text"].rstrip()
        if any(marker in message for marker in DEATH_MARKERS):
            lines = [message]
            failures.append((match["model"], lines))
            open_failure[worker] = lines
        elif worker in open_failure and message:
            open_failure[worker].append(message)
    return [WorkerFailure(model, tuple(lines)) for model, lines in failures]


class LogFollower:
    """The text appended to a log file since an offset (the file may not exist yet)."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path, self.offset = path, offset
        self.text = ""

    @staticmethod
    def end_of(path: Path) -> int:
        return path.stat().st_size if path.exists() else 0

    def read(self) -> str:
        """Everything appended since the offset so far, whole lines only."""
        if self.path.exists():
            with self.path.open("rb") as log:
                log.seek(self.offset)
                chunk = log.read()
            whole = chunk[: chunk.rfind(b"\n") + 1]
            self.offset += len(whole)
            self.text += whole.decode(errors="replace")
        return self.text
