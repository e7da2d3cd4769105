"""Health probe for TorchServe with token auth on (Docker HEALTHCHECK, Kubernetes exec probes).

TorchServe 0.12 asks for a token even on ``/ping``, writes random keys to
``key_file.json`` in its working directory, and lets the inference and management keys
expire (``token_expiration_min``, 60 by default). A plain HTTP probe therefore cannot
work, and a probe that only read the file would start failing an hour after start. This
one reads the file, and when the management key has expired it asks TorchServe for a new
one with the API key (which does not expire), then tries again (``tsbatch.client.auth.KeyFile``,
the toolkit's one place for keys). It never touches the inference key unless asked for it
(``key inference``), so clients' keys are not rotated behind their backs.

``/ping`` stays "Healthy" while a crashed worker restarts, so readiness looks at the
workers instead: every model listed in ``load_models`` must have at least ``minWorkers``
(at least one) READY workers. With token auth off (the cluster config) no key is read.

Readiness also fails once the pod is draining (the file ``TSBATCH_DRAIN_FILE`` exists):
``drain`` is the Kubernetes ``preStop`` hook, which creates it and waits
``TSBATCH_DRAIN_SECONDS`` so the pod leaves the Service before TorchServe is stopped.
A worker that was given a GPU but found no usable CUDA fails its load
(``TSBATCH_REQUIRE_CUDA=1``), so its model never has a READY worker and readiness fails.

The standard library and the toolkit's own config.properties reader only (no third-party
import), so it starts fast inside the image:

    python deploy/probe.py ready            # exit 0 ready, 1 not ready (prints why)
    python deploy/probe.py live             # the frontend answers (metrics port, no token)
    python deploy/probe.py key inference    # print a valid key (refreshed if expired)
    python deploy/probe.py drain            # preStop: leave the Service, wait, exit 0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tsbatch.client.auth import KeyFile
from tsbatch.config.properties import load_models, read_properties
from tsbatch.container import drain_file, drain_seconds, mark_draining
from tsbatch.environment import Environment
from tsbatch.settings.batch import BatchSettings

ENVIRONMENT = Environment.read()
DEFAULT_CONFIG = str(ENVIRONMENT.config_file)
DEFAULT_KEY_FILE = str(ENVIRONMENT.key_file)


class ProbeFailed(Exception):
    """The server is not (yet) what the probe requires; the message says why."""


def local_url(address: str) -> str:
    """A bind address as the probe reaches it from inside the same container."""
    return address.rstrip("/").replace("://0.0.0.0", "://127.0.0.1")


class Client:
    """Just enough of TorchServe's HTTP API for the probes, with key refresh."""

    def __init__(self, config: Path, key_file: Path, timeout: float) -> None:
        properties = read_properties(config)
        self.management = local_url(properties.get("management_address", "http://127.0.0.1:8081"))
        self.metrics = local_url(properties.get("metrics_address", "http://127.0.0.1:8082"))
        self.auth = properties.get("disable_token_authorization", "false").lower() != "true"
        self.models = load_models(properties) or []  # none listed or `all`: every registered model
        self.key_file = KeyFile(key_file, self.management, timeout)
        self.timeout = timeout

    def valid_key(self, kind: str) -> str:
        return self.key_file.valid_key(kind)

    def management_get(self, path: str) -> Any:
        for attempt in (1, 2):
            headers = {"Authorization": f"Bearer {self.valid_key('management')}"} if self.auth else {}
            request = urllib.request.Request(f"{self.management}{path}", headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                # 400 is TorchServe's answer to a wrong or expired token: the key may have
                # expired between our check and the request, so refresh once and retry.
                if exc.code == 400 and self.auth and attempt == 1:
                    self.key_file.refresh("management")
                    continue
                raise ProbeFailed(f"GET {path} answered {exc.code}: {exc.read()[:200]!r}") from exc
        raise AssertionError("unreachable")

    def ready(self) -> str:
        if drain_file().exists():
            raise ProbeFailed(f"draining ({drain_file()} exists): the pod is being stopped")
        listed = [entry["modelName"] for entry in self.management_get("/models").get("models", [])]
        expected = self.models or listed
        if not expected:
            raise ProbeFailed("no model is registered yet")
        missing = sorted(set(expected) - set(listed))
        if missing:
            raise ProbeFailed(f"models not registered yet: {missing}")
        states = []
        for name in expected:
            description = self.management_get(f"/models/{name}")[0]
            workers = description.get("workers", [])
            ready = sum(1 for worker in workers if worker.get("status") == "READY")
            needed = max(1, BatchSettings.described(description).min_workers or 1)
            if ready < needed:
                raise ProbeFailed(
                    f"{name}: {ready}/{needed} workers READY ({[w.get('status') for w in workers]})"
                )
            states.append(f"{name} {ready}/{len(workers)} READY")
        return ", ".join(states)

    def live(self) -> str:
        try:
            with urllib.request.urlopen(f"{self.metrics}/metrics", timeout=self.timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError) as exc:
            raise ProbeFailed(f"metrics endpoint {self.metrics} did not answer: {exc}") from exc
        return "frontend answers"


def drain() -> str:
    """Mark the pod draining (readiness fails from now on), then wait out the drain time."""
    seconds = drain_seconds()
    time.sleep(max(mark_draining(drain_file()) + seconds - time.time(), 0))
    return f"drained for {seconds:g}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("check", choices=["ready", "live", "key", "drain"])
    parser.add_argument("kind", nargs="?", default="inference", help="key kind for `key`")
    parser.add_argument("--config", type=Path, default=Path(DEFAULT_CONFIG))
    parser.add_argument("--key-file", type=Path, default=Path(DEFAULT_KEY_FILE))
    parser.add_argument("--timeout", type=float, default=4.0)
    args = parser.parse_args(argv)
    if args.check == "drain":
        print(f"drain: ok: {drain()}")
        return 0
    client = Client(args.config, args.key_file, args.timeout)
    try:
        if args.check == "key":
            print(client.valid_key(args.kind))
            return 0
        message = client.ready() if args.check == "ready" else client.live()
    except (ProbeFailed, urllib.error.URLError, OSError, KeyError, ValueError) as exc:
        print(f"{args.check}: NOT OK: {exc}", file=sys.stderr)
        return 1
    print(f"{args.check}: ok: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
