"""TorchServe's side of a load test: scrape ``/metrics`` and the management API while it runs.

The plugin (:mod:`tsbatch.locust.plugin`) calls :meth:`ServerView.scrape` every few seconds
from a greenlet; everything else reads what was kept. The metrics endpoint needs no token;
the management API (batch settings, worker pids) takes the management key of the key file.
A scrape that fails leaves the reason in :attr:`ServerView.error`, and the load test goes on:
the client figures gate whether or not the server's can be read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import requests

from tsbatch.client.auth import TokenError
from tsbatch.client.metrics import counters_by_model
from tsbatch.client.torchserve import CallFailed, FixedKeys, TorchServeClient
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.gate import Window
from tsbatch.sla.server import SERVER_COUNTERS, ServerFigures, ServerSnapshot, window_figures

SCRAPE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class ServerEndpoints:
    """Where to read TorchServe: its metrics and management addresses, and the management key."""

    metrics_url: str
    management_url: str
    management_token: str | None = None
    token_source: str = ""

    def client(self) -> TorchServeClient:
        addresses = {"metrics": self.metrics_url, "management": self.management_url}
        keys = FixedKeys({"management": self.management_token}) if self.management_token else None
        return TorchServeClient(addresses, keys, timeout_s=SCRAPE_TIMEOUT_S)


@dataclass
class ServerView:
    """Every scrape of this test, per model, and why the last one failed (``None``: it worked)."""

    endpoints: ServerEndpoints
    models: list[str]
    interval_s: float = 2.0
    snapshots: dict[str, list[ServerSnapshot]] = field(default_factory=dict)
    settings: dict[str, BatchSettings] = field(default_factory=dict)
    error: str | None = None
    management_error: str | None = None
    attempts: int = 0
    client: TorchServeClient = field(init=False)

    def __post_init__(self) -> None:
        self.client = self.endpoints.client()

    def scrape(self, now: float | None = None) -> bool:
        """One scrape of every model; ``False`` (and :attr:`error` set) when ``/metrics`` failed."""
        self.attempts += 1
        try:
            text = self.client.metrics_text(timeout=SCRAPE_TIMEOUT_S)
        except requests.RequestException as exc:
            self.error = f"metrics endpoint {self.client.url('metrics')}/metrics unreachable ({_reason(exc)})"
            return False
        at = time.time() if now is None else now
        counters = counters_by_model(text, self.models, SERVER_COUNTERS)
        for model in self.models:
            pids = self._describe(model)
            self.snapshots.setdefault(model, []).append(ServerSnapshot(at, counters[model], pids))
        self.error = None
        return True

    def _describe(self, model: str) -> frozenset[int] | None:
        """Refresh the model's batch settings; its workers' pids (``None`` when unreadable)."""
        try:
            entry = self.client.describe(model)
            self.settings[model] = BatchSettings.described(entry)
            pids = frozenset(int(worker["pid"]) for worker in entry.get("workers", []) if worker.get("pid"))
        except (
            requests.RequestException,
            CallFailed,
            TokenError,
            ValueError,
            KeyError,
            IndexError,
            TypeError,
        ) as exc:
            self.management_error = f"management API {self.client.model_url(model)} ({_reason(exc)}; key: {self.endpoints.token_source})"
            return None
        self.management_error = None
        return pids

    def figures(self, window: Window) -> dict[str, ServerFigures | None]:
        """Each model's figures over the measured window (``None`` until two scrapes fall inside it)."""
        return {
            model: window_figures(
                model, self.snapshots.get(model, []), window.start, window.end, self.settings.get(model)
            )
            for model in self.models
        }

    def unavailable_reason(self, window: Window) -> str | None:
        """Why there are no server figures for the window, or ``None`` when every model has them."""
        if self.error and not any(self.snapshots.values()):
            return self.error
        if window.start is None:
            return "the measured window has not opened yet (ramp-up)"
        missing = [model for model, figures in self.figures(window).items() if figures is None]
        if not missing:
            return None
        reason = f"fewer than two scrapes of {', '.join(missing)} inside the measured window"
        return f"{reason}; last scrape: {self.error}" if self.error else reason

    def summary(self, window: Window) -> dict[str, Any]:
        """The view's state for ``sla.json``: where it read, how often, and what went wrong."""
        reason = self.unavailable_reason(window)
        return {
            "available": reason is None,
            "reason": reason,
            "metrics_url": self.endpoints.metrics_url,
            "management_url": self.endpoints.management_url,
            "interval_s": self.interval_s,
            "scrapes": self.attempts,
            "last_error": self.error,
            "management_error": self.management_error,
        }


def _reason(exc: BaseException) -> str:
    """A short cause: the HTTP status, or the exception's type (connection errors are long)."""
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, CallFailed):
        return f"HTTP {exc.status}"
    return type(exc).__name__
