"""Every environment variable the toolkit reads, in one typed settings object.

Standard library only: ``deploy/probe.py`` and the container supervisor read it at start,
where a third-party import would slow every probe. The workers' own variables
(``TSBATCH_PRECISION``, ``TSBATCH_REQUIRE_CUDA``) are read by ``batchkit`` (loader, precision),
because the handlers never import the toolkit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ALLOW_DIGITS_ENV = "TSBATCH_ALLOW_DIGITS"
TOKEN_ENV = "TS_INFERENCE_TOKEN"
WRITABLE_STORE_ENV = "TSBATCH_WRITABLE_STORE"
KSERVE_STORAGE_ENV = "STORAGE_URI"
DRAIN_FILE_ENV = "TSBATCH_DRAIN_FILE"
DRAIN_SECONDS_ENV = "TSBATCH_DRAIN_SECONDS"
SLA_PROFILE_ENV = "SLA_PROFILE"
CONFIG_FILE_ENV = "TS_CONFIG_FILE"
KEY_FILE_ENV = "TS_KEY_FILE"
CACHE_HOME_ENV = "XDG_CACHE_HOME"
DEFAULT_CONTAINER_CONFIG = "/app/deploy/config.container.properties"


class EnvironmentSettingError(ValueError):
    """An environment variable holds a value the toolkit cannot use; the message names it."""


@dataclass(frozen=True)
class Environment:
    """What the environment overrides, each field read from the variable named beside it."""

    # TSBATCH_ALLOW_DIGITS=1: the build may package the offline digits placeholder.
    allow_digits: bool = False
    # TS_INFERENCE_TOKEN: the inference key for clients (else the server's key_file.json).
    inference_token: str | None = None
    # TSBATCH_WRITABLE_STORE: where the container repackages when a mounted config wins.
    writable_store: Path = Path("model-store")
    # STORAGE_URI: set by KServe when its storage initializer downloaded the model store.
    storage_uri: str | None = None
    # TSBATCH_DRAIN_FILE: exists while the pod drains (readiness fails).
    drain_file: Path = Path("draining")
    # TSBATCH_DRAIN_SECONDS: how long a drain lets routed requests finish.
    drain_seconds: float = 15.0
    # SLA_PROFILE: the SLA profile of loadtest/sla.yaml when none is given.
    sla_profile: str | None = None
    # TS_CONFIG_FILE: the config the container's probes read (TorchServe's own variable).
    config_file: Path = Path(DEFAULT_CONTAINER_CONFIG)
    # TS_KEY_FILE: the key file the probes read (default: key_file.json here).
    key_file: Path = Path("key_file.json")
    # XDG_CACHE_HOME: the cache folder's parent (default ~/.cache); the toolkit keeps what it
    # can make again (tsbatch.cache) in its tsbatch/ folder. os.path.expanduser, not
    # Path.home(): a container user without a home must still import this module.
    cache_dir: Path = Path(os.path.expanduser("~/.cache/tsbatch"))

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """The settings from ``environ`` (default: this process's); relative paths from here."""
        env = os.environ if environ is None else environ
        here = Path.cwd()
        allow = env.get(ALLOW_DIGITS_ENV, "0").strip()
        if allow not in ("0", "1", ""):
            raise EnvironmentSettingError(f"{ALLOW_DIGITS_ENV} must be 0 or 1, got {allow!r}")
        seconds = env.get(DRAIN_SECONDS_ENV, "15")
        try:
            drain_seconds = float(seconds)
        except ValueError:
            raise EnvironmentSettingError(
                f"{DRAIN_SECONDS_ENV} must be seconds (a number), got {seconds!r}"
            ) from None
        if drain_seconds < 0:
            raise EnvironmentSettingError(f"{DRAIN_SECONDS_ENV} must be 0 or more, got {seconds!r}")
        return cls(
            allow_digits=allow == "1",
            inference_token=env.get(TOKEN_ENV) or None,
            writable_store=Path(env.get(WRITABLE_STORE_ENV) or here / "model-store"),
            storage_uri=env.get(KSERVE_STORAGE_ENV) or None,
            drain_file=Path(env.get(DRAIN_FILE_ENV) or here / "draining"),
            drain_seconds=drain_seconds,
            sla_profile=env.get(SLA_PROFILE_ENV) or None,
            config_file=Path(env.get(CONFIG_FILE_ENV) or DEFAULT_CONTAINER_CONFIG),
            key_file=Path(env.get(KEY_FILE_ENV) or here / "key_file.json"),
            cache_dir=Path(env.get(CACHE_HOME_ENV) or os.path.expanduser("~/.cache")) / "tsbatch",
        )
