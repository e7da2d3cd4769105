"""The management and inference calls of ``tsbatch apply``, worded for its users.

The calls themselves are the client's (:mod:`tsbatch.client.torchserve`: keys refreshed when
they expire); here each refusal becomes an :class:`ApplyError` saying what to do. A key refused
although the file says it is valid means the file is not the running server's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests

from tsbatch.client.auth import TokenError
from tsbatch.client.torchserve import CallFailed, KeyRefused
from tsbatch.server.process import TorchServe
from tsbatch.workloads.payloads import Payload

POLL_S = 0.2
ENABLE_MODEL_API = (
    "set enable_model_api=true in the server's config.properties and restart it (`make serve`); "
    "docs/live-settings.md says what that opens and how to keep it on loopback"
)
T = TypeVar("T")


class ApplyError(RuntimeError):
    """An apply stopped; the message says what the server answered, what state it is in and what to do."""


class Management:
    """The calls of an apply; every refusal becomes an ApplyError."""

    def __init__(self, server: TorchServe, timeout_s: float) -> None:
        self.server, self.client, self.timeout_s = server, server.client, timeout_s

    def worded(self, call: Callable[[], T]) -> T:
        """``call``'s answer; its failure as an ApplyError that says what to do."""
        server = self.server
        try:
            return call()
        except TokenError as exc:
            raise ApplyError(
                f"no valid management key: {exc}; name the running server's run directory with --run-dir"
            ) from None
        except requests.RequestException as exc:
            raise ApplyError(
                f"no answer from the management API at {server.url('management')} ({type(exc).__name__}: "
                f"{exc}): is the server running (`tsbatch status --run-dir {server.run_dir}`)?"
            ) from None
        except KeyRefused as exc:
            raise ApplyError(
                f"the management API refused the key (HTTP {exc.status}: {exc.text}), though "
                f"{server.key_file} says it has not expired: that file is not the running server's; "
                "name the run directory of the running server with --run-dir (`tsbatch serve` writes "
                ".serve/key_file.json)"
            ) from None
        except CallFailed as exc:
            raise ApplyError(str(exc)) from None

    def describe(self, model: str, version: str | None = None) -> dict[str, Any]:
        return self.worded(lambda: self.client.describe(model, version))

    def versions(self, model: str) -> list[str]:
        return self.worded(lambda: self.client.versions(model))

    def require_model_api(self) -> None:
        if not self.worded(self.client.model_api_enabled):
            raise ApplyError(f"model registration is off on this server (HTTP 405): {ENABLE_MODEL_API}")

    def register(self, archive: str, model: str, workers: int) -> None:
        self.worded(lambda: self.client.register(archive, model, workers))

    def scale(self, model: str, workers: int) -> None:
        self.worded(lambda: self.client.scale(model, workers))

    def set_default(self, model: str, version: str) -> None:
        self.worded(lambda: self.client.set_default(model, version))

    def unregister(self, model: str, version: str) -> None:
        self.worded(lambda: self.client.unregister(model, version))

    def predict(self, model: str, version: str, payload: Payload) -> tuple[int, float, str]:
        """One request to that version: its status, seconds and the start of its body."""
        begin = time.monotonic()
        try:
            response = self.client.predict(
                model, payload.body, payload.content_type, version=version, timeout=self.timeout_s
            )
            status, text = response.status_code, response.text[:200]
        except TokenError as exc:
            raise ApplyError(
                f"no valid inference key: {exc}; name the running server's run directory with --run-dir"
            ) from None
        except requests.RequestException as exc:
            status, text = 0, f"{type(exc).__name__}: {exc}"
        return status, time.monotonic() - begin, text

    def wait(self, what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise ApplyError(f"timed out after {self.timeout_s:.0f}s waiting for {what}")
            time.sleep(POLL_S)


def ready_workers(entry: dict[str, Any]) -> int:
    return sum(1 for worker in entry.get("workers", []) if worker.get("status") == "READY")


def pending(entry: dict[str, Any]) -> int:
    return int(entry.get("jobQueueStatus", {}).get("pendingRequests", 0))
