"""The inference token for TorchServe's token authorization (on by default in this project).

Order: the ``TS_INFERENCE_TOKEN`` environment variable (CI secrets, remote servers), then
the ``inference`` key of the server's ``key_file.json`` (``make serve`` runs TorchServe in
``.serve/``, so that is the default). Without either, requests go out unauthenticated and
an auth-enabled TorchServe answers 400: the error-rate check then fails the run, loudly.
"""

from __future__ import annotations

import calendar
import json
import time
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
