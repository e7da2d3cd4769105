"""TorchServe's keys for its token authorization (on by default in this project).

The inference token's order: the ``TS_INFERENCE_TOKEN`` environment variable (CI secrets,
remote servers), then the ``inference`` key of the server's ``key_file.json`` (``make serve``
runs TorchServe in ``.serve/``, so that is the default). Without either, requests go out
unauthenticated and an auth-enabled TorchServe answers 400: the error-rate check then fails
the run, loudly.

Keys expire (``token_expiration_min``, 60 by default): :class:`KeyFile` is the one place
that knows it, and asks TorchServe for a fresh key with the API key (which does not expire)
when the one in the file has. Standard library only: ``deploy/probe.py`` imports it inside
the image, where it must start fast.
"""

from __future__ import annotations

import calendar
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from tsbatch.environment import TOKEN_ENV, Environment
from tsbatch.paths import SERVE_DIR

DEFAULT_KEY_FILE = SERVE_DIR / "key_file.json"


class TokenError(ValueError):
    """The key file exists but is not TorchServe's key_file.json."""


def read_key_file(path: Path, kind: str = "inference") -> tuple[str, float | None]:
    """The ``inference`` (or ``management``) key and, when TorchServe wrote one, its expiry (epoch s)."""
    try:
        keys = json.loads(path.read_text())
        entry = keys[kind]
        key = entry["key"]
    except (ValueError, KeyError, TypeError) as exc:
        raise TokenError(
            f"{path} is not a TorchServe key file (expected {{{kind!r}: {{'key': ...}}}})"
        ) from exc
    expiry = entry.get("expiration time")
    return str(key), _epoch(expiry)


class KeyFile:
    """A server's ``key_file.json``, read afresh on every call (TorchServe rewrites it when a
    key is refreshed), and the management address its token API answers on."""

    REREAD_TRIES = 5  # TorchServe rewrites the file in place: a read may catch it half written

    def __init__(self, path: Path, management_url: str, timeout_s: float = 10) -> None:
        self.path, self.management_url, self.timeout_s = path, management_url.rstrip("/"), timeout_s

    def keys(self) -> dict[str, dict[str, str]]:
        for attempt in range(self.REREAD_TRIES):
            try:
                keys = json.loads(self.path.read_text())
            except FileNotFoundError:
                raise TokenError(
                    f"{self.path} does not exist (is TorchServe running in {self.path.parent}?)"
                ) from None
            except ValueError:
                if attempt == self.REREAD_TRIES - 1:
                    raise TokenError(f"{self.path} is not JSON (being rewritten by TorchServe?)") from None
                time.sleep(0.05)
                continue
            if not isinstance(keys, dict):
                raise TokenError(f"{self.path} is not a TorchServe key file")
            return keys
        raise AssertionError("unreachable")

    def key(self, kind: str) -> str:
        try:
            return str(self.keys()[kind]["key"])
        except (KeyError, TypeError):
            raise TokenError(f"{self.path} is not a TorchServe key file (no {kind!r} key)") from None

    def expiry(self, kind: str) -> float | None:
        """When the ``kind`` key expires (epoch s), None for a key that does not."""
        entry = self.keys().get(kind)
        return _epoch(entry.get("expiration time")) if isinstance(entry, dict) else None

    def expired(self, kind: str, margin_s: float = 1.0) -> bool:
        """Whether the key has expired or will within ``margin_s`` (the file keeps whole seconds)."""
        expiry = self.expiry(kind)
        return expiry is not None and expiry <= time.time() + margin_s

    def refresh(self, kind: str) -> str:
        """Ask TorchServe for a new ``kind`` key (``GET /token?type=kind`` with the API key); it
        rewrites the file. Every client of that kind must re-read it: the old key stops working."""
        request = urllib.request.Request(
            f"{self.management_url}/token?type={kind}", headers={"Authorization": f"Bearer {self.key('API')}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            raise TokenError(
                f"TorchServe refused to refresh the {kind} key with the API key of {self.path} (HTTP {exc.code}): "
                "that file is not the running server's (name the server's run directory)"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise TokenError(
                f"no answer from {self.management_url}/token ({exc}): is the server running?"
            ) from None
        return self.key(kind)

    def valid_key(self, kind: str) -> str:
        """The ``kind`` key, refreshed first when it has expired."""
        return self.refresh(kind) if self.expired(kind) else self.key(kind)


def _epoch(value: object) -> float | None:
    """TorchServe writes the expiry as UTC ``2026-11-30T00:11:58.058881787Z``; seconds suffice."""
    if not isinstance(value, str):
        return None
    try:
        moment = time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    return float(calendar.timegm(moment))


def inference_token(
    key_file: Path | str | None = DEFAULT_KEY_FILE, env: dict[str, str] | None = None
) -> tuple[str | None, str]:
    """``(token or None, where it came from)`` for logs and the report."""
    token = Environment.read(env).inference_token
    if token:
        return token, f"${TOKEN_ENV}"
    if key_file and Path(key_file).exists():
        key, expiry = read_key_file(Path(key_file))
        note = ""
        if expiry is not None and expiry < time.time():
            note = " (its expiration time has passed: restart the server or set a fresh key)"
        return key, f"{key_file}{note}"
    return None, f"none (no ${TOKEN_ENV} and no {key_file})"


def management_token(key_file: Path | str | None = DEFAULT_KEY_FILE) -> tuple[str | None, str]:
    """``(management key or None, why)``: read-only management calls (describe a model) need it too."""
    if not key_file or not Path(key_file).exists():
        return None, f"no key file at {key_file}"
    try:
        return read_key_file(Path(key_file), "management")[0], str(key_file)
    except TokenError as exc:
        return None, str(exc)


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}
