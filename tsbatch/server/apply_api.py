"""The management and inference calls of ``tsbatch apply``, with keys that may expire.

Every call sends the run directory's key, refreshed first when its expiration time has passed
(``tsbatch.client.auth.KeyFile``); a key refused although the file says it is valid means the
file is not the running server's, and that is what the error says.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from tsbatch.client.auth import TokenError
from tsbatch.server.process import TorchServe
from tsbatch.workloads.payloads import Payload

POLL_S = 0.2
ENABLE_MODEL_API = (
    "set enable_model_api=true in the server's config.properties and restart it (`make serve`); "
    "docs/live-settings.md says what that opens and how to keep it on loopback"
)


class ApplyError(RuntimeError):
    """An apply stopped; the message says what the server answered, what state it is in and what to do."""


def refused_key(status: int, text: str) -> bool:
    """TorchServe 0.12 answers a wrong or expired key with 400 "Token Authorization failed"."""
    return status in (400, 401, 403) and "token" in text.lower()


class Management:
    """The management and inference calls of an apply; every refusal becomes an ApplyError."""

    def __init__(self, server: TorchServe, timeout_s: float) -> None:
        self.server, self.timeout_s = server, timeout_s

    def headers(self, kind: str, refresh: bool = False) -> dict[str, str]:
        """The ``kind`` key's header: refreshed when expired (or when ``refresh``)."""
        if not self.server.token_auth:
            return {}
        keys = self.server.keys
        try:
            key = keys.refresh(kind) if refresh else keys.valid_key(kind)
        except TokenError as exc:
            raise ApplyError(
                f"no valid {kind} key: {exc}; name the running server's run directory with --run-dir"
            ) from None
        return {"Authorization": f"Bearer {key}"}

    def send(self, kind: str, method: str, url: str, **options: Any) -> requests.Response:
        """One request with the ``kind`` key; a refusal of a key that expired on the way is
        refreshed and sent once more."""
        extra = options.pop("headers", {})
        response = requests.request(
            method, url, headers={**extra, **self.headers(kind)}, timeout=self.timeout_s, **options
        )
        if refused_key(response.status_code, response.text) and self.server.keys.expired(kind, margin_s=5):
            response = requests.request(
                method,
                url,
                headers={**extra, **self.headers(kind, refresh=True)},
                timeout=self.timeout_s,
                **options,
            )
        return response

    def call(self, method: str, path: str, ok: tuple[int, ...] = (200,), **params: Any) -> Any:
        url = f"{self.server.url('management')}{path}"
        try:
            response = self.send("management", method, url, params=params)
        except requests.RequestException as exc:
            raise ApplyError(
                f"no answer from the management API at {url} ({type(exc).__name__}: {exc}): is the server "
                f"running (`tsbatch status --run-dir {self.server.run_dir}`)?"
            ) from None
        if response.status_code in ok:
            return response.json() if response.content else None
        text = response.text.strip()[:300]
        if refused_key(response.status_code, text):
            raise ApplyError(
                f"the management API refused the key (HTTP {response.status_code}: {text}), though "
                f"{self.server.key_file} says it has not expired: that file is not the running server's; "
                "name the run directory of the running server with --run-dir (`tsbatch serve` writes "
                ".serve/key_file.json)"
            )
        raise ApplyError(f"{method} {path} answered HTTP {response.status_code}: {text}")

    def describe(self, model: str, version: str | None = None) -> dict[str, Any]:
        path = f"/models/{model}" + (f"/{version}" if version else "")
        return self.call("GET", path)[0]

    def versions(self, model: str) -> list[str]:
        return [entry["modelVersion"] for entry in self.call("GET", f"/models/{model}/all")]

    def require_model_api(self) -> None:
        """POST /models without a url: 400 (url missing) when registration is on, 405 when off."""
        try:
            self.call("POST", "/models", ok=(400,))
        except ApplyError as exc:
            if "HTTP 405" in str(exc):
                raise ApplyError(
                    f"model registration is off on this server (HTTP 405): {ENABLE_MODEL_API}"
                ) from None
            raise

    def predict(self, model: str, version: str, payload: Payload) -> tuple[int, float, str]:
        """One request to that version: its status, seconds and the start of its body."""
        url = f"{self.server.url('inference')}/predictions/{model}/{version}"
        begin = time.monotonic()
        try:
            response = self.send(
                "inference", "POST", url, data=payload.body, headers={"Content-Type": payload.content_type}
            )
            status, text = response.status_code, response.text[:200]
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
