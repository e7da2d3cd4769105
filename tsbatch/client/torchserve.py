"""The one TorchServe client: its addresses, its keys, one HTTP session and every call the
toolkit makes (predict, describe, register, scale, set-default, unregister, metrics).

Nothing else builds a management URL or an auth header. Each call sends the ``kind`` key,
refreshed first when it has expired (:class:`tsbatch.client.auth.KeyFile`); a key refused on the
way because it expired meanwhile is refreshed and the call sent once more. A refusal the client
cannot mend raises :class:`CallFailed` (or :class:`KeyRefused`); callers word it for their users.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import requests


class Keys(Protocol):
    """Where keys come from: a server's key file (:class:`KeyFile`) or a fixed key."""

    def valid_key(self, kind: str) -> str: ...

    def refresh(self, kind: str) -> str: ...

    def expired(self, kind: str, margin_s: float = 1.0) -> bool: ...


@dataclass(frozen=True)
class FixedKeys:
    """Keys handed over as they are (a token from the environment): never refreshed."""

    keys: dict[str, str]

    def valid_key(self, kind: str) -> str:
        return self.keys[kind]

    def refresh(self, kind: str) -> str:
        return self.keys[kind]

    def expired(self, kind: str, margin_s: float = 1.0) -> bool:
        return False


class CallFailed(RuntimeError):
    """TorchServe answered a call with a status the caller did not expect (0: no answer)."""

    def __init__(self, method: str, url: str, status: int, text: str) -> None:
        super().__init__(f"{method} {url} answered HTTP {status}: {text}")
        self.method, self.url, self.status, self.text = method, url, status, text


class KeyRefused(CallFailed):
    """TorchServe refused the key although it had not expired: not the running server's key file."""


def refused_key(status: int, text: str) -> bool:
    """TorchServe 0.12 answers a wrong or expired key with 400 "Token Authorization failed"."""
    return status in (400, 401, 403) and "token" in text.lower()


@dataclass
class TorchServeClient:
    """One server's API. ``addresses``: its ``inference``, ``management`` and ``metrics`` URLs;
    ``keys`` is None when the server runs without token authorization."""

    addresses: dict[str, str]
    keys: Keys | None = None
    timeout_s: float = 30
    session: requests.Session = field(default_factory=requests.Session)

    def url(self, kind: str) -> str:
        return self.addresses[kind].rstrip("/")

    def headers(self, kind: str = "inference", refresh: bool = False) -> dict[str, str]:
        """The ``kind`` key's header, refreshed first when it has expired (or when ``refresh``)."""
        if self.keys is None:
            return {}
        key = self.keys.refresh(kind) if refresh else self.keys.valid_key(kind)
        return {"Authorization": f"Bearer {key}"}

    def send(self, kind: str, method: str, path: str, **options: Any) -> requests.Response:
        """One request to the ``kind`` API with its key; resent once when the key expired on the way."""
        url = f"{self.url(kind)}{path}"
        extra = options.pop("headers", {})
        options.setdefault("timeout", self.timeout_s)
        response = self.session.request(method, url, headers={**extra, **self.headers(kind)}, **options)
        if (
            self.keys is not None
            and refused_key(response.status_code, response.text)
            and self.keys.expired(kind, margin_s=5)
        ):
            headers = {**extra, **self.headers(kind, refresh=True)}
            response = self.session.request(method, url, headers=headers, **options)
        return response

    def management(
        self,
        method: str,
        path: str,
        ok: tuple[int, ...] = (200,),
        timeout: float | None = None,
        **params: Any,
    ) -> Any:
        """A management call's JSON answer (None when empty); another status raises :class:`CallFailed`."""
        response = self.send("management", method, path, params=params, timeout=timeout or self.timeout_s)
        if response.status_code in ok:
            return response.json() if response.content else None
        text = response.text.strip()[:300]
        failure = KeyRefused if refused_key(response.status_code, text) else CallFailed
        raise failure(method, path, response.status_code, text)

    # ---- inference and metrics ----------------------------------------------------
    def predict(
        self,
        model: str,
        body: bytes | str,
        content_type: str = "application/octet-stream",
        version: str | None = None,
        timeout: float = 60,
    ) -> requests.Response:
        path = f"/predictions/{model}" + (f"/{version}" if version else "")
        headers = {"Content-Type": content_type}
        return self.send("inference", "POST", path, data=body, headers=headers, timeout=timeout)

    def metrics_text(self, timeout: float = 10) -> str:
        """The Prometheus text of ``/metrics`` (no key: the metrics API takes none)."""
        response = self.session.get(f"{self.url('metrics')}/metrics", timeout=timeout)
        response.raise_for_status()
        return response.text

    # ---- management ---------------------------------------------------------------
    @staticmethod
    def model_path(model: str, version: str | None = None) -> str:
        """A model's (or one version's) path in the management API."""
        return f"/models/{model}" + (f"/{version}" if version else "")

    def model_url(self, model: str, version: str | None = None) -> str:
        """The full management URL of a model, for messages that tell ops what to call."""
        return self.url("management") + self.model_path(model, version)

    def describe(
        self, model: str, version: str | None = None, customized: bool = False, timeout: float | None = None
    ) -> dict[str, Any]:
        """The describe answer of ``model`` (its default version, or ``version``)."""
        path = self.model_path(model, version)
        params = {"customized": "true"} if customized else {}
        return self.management("GET", path, timeout=timeout, **params)[0]

    def versions(self, model: str) -> list[str]:
        return [entry["modelVersion"] for entry in self.management("GET", f"/models/{model}/all")]

    def model_api_enabled(self) -> bool:
        """POST /models without a url: 400 (url missing) when registration is on, 405 when off."""
        try:
            self.management("POST", "/models", ok=(400,))
        except CallFailed as exc:
            if exc.status == 405:
                return False
            raise
        return True

    def register(self, archive: str, model: str, workers: int) -> None:
        """Register ``archive`` from the model store; its workers start in the background."""
        self.management(
            "POST",
            "/models",
            ok=(200, 202),
            url=archive,
            model_name=model,
            initial_workers=workers,
            synchronous="false",
        )

    def scale(self, model: str, workers: int) -> None:
        """Set the default version's workers in place; they start or stop in the background."""
        self.management(
            "PUT",
            self.model_path(model),
            ok=(200, 202),
            min_worker=workers,
            max_worker=workers,
            synchronous="false",
        )

    def set_default(self, model: str, version: str) -> None:
        self.management("PUT", f"{self.model_path(model, version)}/set-default")

    def unregister(self, model: str, version: str) -> None:
        self.management("DELETE", self.model_path(model, version))

    def close(self) -> None:
        self.session.close()
