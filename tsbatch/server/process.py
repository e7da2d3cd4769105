"""Start, wait for, talk to and stop a real TorchServe instance.

Used by ``make serve``, the benchmarks, the tuner and the integration tests. Each
instance lives in its own run directory: TorchServe writes ``key_file.json``, its logs
and (through ``TMPDIR``) its pid file there, so several instances can run side by side.
The effective config is ``config.properties`` with paths made absolute and, where asked,
ports and settings overridden; the source file is never modified.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import requests

from tsbatch.client.auth import KeyFile
from tsbatch.client.metrics import model_counters
from tsbatch.client.torchserve import CallFailed, TorchServeClient
from tsbatch.config.properties import (
    ADDRESS_KEYS,
    model_settings,
    read_properties,
    replace_entry,
)
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.ports import free_ports, worker_port_base
from tsbatch.server.process_group import read_pid, stop_process_group
from tsbatch.server.worker_log import LogFollower, WorkerFailure, worker_failures

# A death seen before its traceback's exception line is waited for this long (the worker
# writes its traceback in pieces), then reported as it stands.
TRACEBACK_GRACE_S = 2.0


class ServerError(RuntimeError):
    """TorchServe did not start, or a model did not become ready; the log tail says why."""


class WorkerLoadError(ServerError):
    """A worker died while loading its model: the message leads with its exception line."""

    def __init__(self, failure: WorkerFailure, log: Path) -> None:
        super().__init__(f"{failure.describe()}\n(the whole log: {log})")
        self.failure = failure


def effective_properties(
    source: Path,
    run_dir: Path,
    model_store: Path,
    ports: dict[str, int] | None = None,
    overrides: dict[str, str] | None = None,
) -> Path:
    """Write ``run_dir/config.properties``: the source with absolute paths and overrides.

    Batch settings are not among them: the archive's model-config.yaml wins over ``models=``,
    so other batch settings need ``package.private_store`` (repackaged archives).
    """
    text = source.read_text()
    values = read_properties(source)
    replacements: dict[str, str] = {"model_store": str(model_store.resolve())}
    for key in ("metrics_config", "plugins_path"):
        relative = values.get(key)
        if relative and not Path(relative).is_absolute():
            replacements[key] = str((source.parent / relative).resolve())
    vmargs = values.get("vmargs")
    if vmargs:
        replacements["vmargs"] = absolute_log_config(vmargs, source.parent)
    for kind, port in (ports or {}).items():
        replacements[ADDRESS_KEYS[kind]] = f"http://127.0.0.1:{port}"
    replacements.update(overrides or {})
    for key, value in replacements.items():
        text = replace_entry(text, key, f"{key}={value}\n")
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.properties"
    path.write_text(text)
    return path


LOG_CONFIG_FLAG = "-Dlog4j.configurationFile="
# torchserve.out (TorchServe's prints: warnings and errors with log4j2.xml) is moved to
# torchserve.out.1 at a start when past this size: two files at most.
CONSOLE_LOG_CAP_BYTES = 10 * 2**20


def absolute_log_config(vmargs: str, base: Path) -> str:
    """``vmargs`` with a relative log4j2 configuration made absolute (TorchServe runs in its run
    dir): beside the config that names it, else the toolkit's own (a config copied elsewhere).
    A file found in neither is an error: log4j2 would fall back to the console, with no logs."""
    words = []
    for word in vmargs.split():
        path = word.removeprefix(LOG_CONFIG_FLAG)
        if word.startswith(LOG_CONFIG_FLAG) and ":" not in path and not Path(path).is_absolute():
            found = [c for c in (base / path, REPO_ROOT / path) if c.is_file()]
            if not found:
                raise ServerError(f"vmargs names {path}, found neither in {base} nor in {REPO_ROOT}")
            word = LOG_CONFIG_FLAG + str(found[0].resolve())
        words.append(word)
    return " ".join(words)


def rotated_console_log(path: Path, cap_bytes: int = CONSOLE_LOG_CAP_BYTES) -> Path:
    if path.exists() and path.stat().st_size > cap_bytes:
        path.replace(path.with_name(path.name + ".1"))
    return path


@dataclass
class TorchServe:
    """One TorchServe process tree, addressed by its loopback URLs and tokens."""

    run_dir: Path
    properties_path: Path
    model_store: Path
    process: subprocess.Popen[bytes] | None = None
    # Where this instance's part of the model log begins (a restarted server appends to it).
    model_log_offset: int = 0

    @classmethod
    def from_run_dir(cls, run_dir: Path) -> TorchServe:
        """The instance started in ``run_dir`` (``tsbatch serve``'s ``.serve``, or a private
        one): its effective config, key file and model store are all there."""
        properties = run_dir / "config.properties"
        store = read_properties(properties).get("model_store", "") if properties.exists() else ""
        return cls(run_dir=run_dir, properties_path=properties, model_store=Path(store))

    # ---- addresses and auth -------------------------------------------------------
    @property
    def properties(self) -> dict[str, str]:
        return read_properties(self.properties_path)

    def url(self, kind: str) -> str:
        return self.properties[ADDRESS_KEYS[kind]].rstrip("/")

    @property
    def key_file(self) -> Path:
        return self.run_dir / "key_file.json"

    @property
    def keys(self) -> KeyFile:
        """The key file, which can refresh an expired key (``KeyFile.valid_key``)."""
        return KeyFile(self.key_file, self.url("management"))

    @property
    def token_auth(self) -> bool:
        return self.properties.get("disable_token_authorization", "false").lower() != "true"

    def token(self, kind: str = "inference") -> str | None:
        """The ``kind`` key as the file holds it now (expired or not: see ``keys``)."""
        return self.keys.key(kind) if self.token_auth else None

    @cached_property
    def client(self) -> TorchServeClient:
        """The one client of this server's APIs: its addresses, its keys and one session."""
        properties = self.properties
        addresses = {kind: properties[key] for kind, key in ADDRESS_KEYS.items() if key in properties}
        return TorchServeClient(addresses, self.keys if self.token_auth else None)

    def model_counters(self, model: str, names: list[str]) -> dict[str, float]:
        """Each named Prometheus metric for ``model``, summed over its other labels (0 if absent)."""
        return model_counters(self.client.metrics_text(), model, names)

    def settled_counters(
        self,
        model: str,
        names: list[str],
        at_least: dict[str, float] | None = None,
        quiet_s: float = 0.5,
        timeout: float = 30,
    ) -> dict[str, float]:
        """Counters once the frontend has caught up with the worker.

        The worker prints its metric lines to stdout and the frontend parses them on its own
        thread, so a response can reach the client before its batch is counted. Scrape until
        every ``at_least`` floor is reached and nothing has moved for ``quiet_s``.
        """
        floors = at_least or {}
        deadline = time.monotonic() + timeout
        last = self.model_counters(model, names)
        while True:
            time.sleep(quiet_s)
            current = self.model_counters(model, names)
            reached = all(current.get(name, 0.0) >= floor for name, floor in floors.items())
            if (current == last and reached) or time.monotonic() > deadline:
                return current
            last = current

    # ---- lifecycle ----------------------------------------------------------------
    def start(self, models: list[str], timeout: float = 180) -> None:
        """Start TorchServe in its own process group and wait until every model is READY."""
        env = dict(os.environ)
        tmp = self.run_dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env.update(
            TMPDIR=str(tmp),  # TorchServe's pid file lives in TMPDIR: one per instance
            LOG_LOCATION=str(self.run_dir / "logs"),
            METRICS_LOCATION=str(self.run_dir / "logs"),
            TS_DISABLE_SYSTEM_METRICS=env.get("TS_DISABLE_SYSTEM_METRICS", "false"),
        )
        self.key_file.unlink(missing_ok=True)
        self.model_log_offset = LogFollower.end_of(self.model_log)
        command = [
            str(Path(sys.executable).parent / "torchserve"),
            "--start",
            "--foreground",
            "--ncs",
            "--model-store", str(self.model_store),
            "--ts-config", str(self.properties_path),
        ]  # fmt: skip
        log = rotated_console_log(self.run_dir / "torchserve.out").open("ab")
        self.process = subprocess.Popen(
            command, cwd=self.run_dir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        (self.run_dir / "launcher.pid").write_text(str(self.process.pid))
        try:
            self.wait_ready(models, timeout)
        except Exception:
            self.stop()
            raise

    @property
    def model_log(self) -> Path:
        return self.run_dir / "logs" / "model_log.log"

    @property
    def frontend_log(self) -> Path:
        """The frontend's own log (``ts_log.log``): each worker thread's batches, among others."""
        return self.run_dir / "logs" / "ts_log.log"

    def wait_ready(self, models: list[str], timeout: float) -> None:
        """Wait until every model's workers are READY; a worker that dies while loading
        ends the wait at once (:class:`WorkerLoadError`), as does the frontend exiting."""
        deadline = time.monotonic() + timeout
        pending = list(models)
        follower = LogFollower(self.model_log, self.model_log_offset)
        first_seen: dict[str, float] = {}
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServerError(f"TorchServe exited with {self.process.returncode}\n{self.log_tail()}")
            for failure in worker_failures(follower.read()):
                if failure.model not in pending:
                    continue
                seen = first_seen.setdefault(failure.model, time.monotonic())
                if failure.complete or time.monotonic() - seen > TRACEBACK_GRACE_S:
                    raise WorkerLoadError(failure, self.model_log)
            auth_off = self.properties.get("disable_token_authorization", "false").lower() == "true"
            if auth_off or self.key_file.exists():
                # the key file may exist but still be half written: try again next round
                with contextlib.suppress(requests.RequestException, ValueError, KeyError):
                    pending = [m for m in pending if not self._model_ready(m)]
                if not pending:
                    return
            time.sleep(0.5)
        raise ServerError(f"models not READY after {timeout:.0f}s: {pending}\n{self.log_tail()}")

    def register_and_wait(self, archive: str, model: str, workers: int, timeout: float = 180) -> None:
        """Register ``archive`` (a file in the model store) as ``model`` and wait until its
        workers are READY; a worker that dies loading raises :class:`WorkerLoadError`."""
        self.model_log_offset = LogFollower.end_of(self.model_log)
        self.client.register(archive, model, workers)
        self.wait_ready([model], timeout)

    def exited(self) -> bool:
        """The TorchServe this object started has exited (False for one it did not start)."""
        return self.process is not None and self.process.poll() is not None

    def _model_ready(self, model: str) -> bool:
        try:
            workers = self.client.describe(model, timeout=5).get("workers", [])
        except CallFailed:
            return False
        return bool(workers) and all(w.get("status") == "READY" for w in workers)

    def log_tail(self, lines: int = 40) -> str:
        chunks = []
        for path in (self.run_dir / "torchserve.out", self.run_dir / "logs" / "model_log.log"):
            if path.exists():
                chunks.append(
                    f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
                )
        return "\n".join(chunks)

    def stop(self, timeout: float = 30) -> None:
        """Stop the whole process group (launcher, Java frontend, Python workers)."""
        pid = self.process.pid if self.process else read_pid(self.run_dir / "launcher.pid")
        if pid is None:
            return
        stop_process_group(pid, timeout, self.process)
        (self.run_dir / "launcher.pid").unlink(missing_ok=True)
        if "client" in self.__dict__:  # made on first use
            self.client.close()


def start_instance(
    run_dir: Path,
    model_store: Path,
    models: list[str] | None = None,
    source: Path = DEFAULT_PROPERTIES,
    private_ports: bool = True,
    overrides: dict[str, str] | None = None,
    timeout: float = 180,
) -> TorchServe:
    """Start a private instance (free loopback ports by default) serving ``models``."""
    settings = model_settings(read_properties(source))
    names = models if models is not None else list(settings)
    props = dict(overrides or {})
    props.setdefault("load_models", ",".join(f"{name}.mar" for name in names))
    ports = None
    if private_ports:
        *api_ports, grpc_inference, grpc_management = free_ports(len(ADDRESS_KEYS) + 2)
        ports = dict(zip(ADDRESS_KEYS, api_ports, strict=True))
        # Workers talk to the frontend on sockets numbered from this port (default 9000);
        # a distinct range lets private instances run beside `make serve`.
        props.setdefault("initial_worker_port", str(worker_port_base()))
        # gRPC listens too (7070/7071 by default) and would collide between instances.
        props.setdefault("grpc_inference_port", str(grpc_inference))
        props.setdefault("grpc_management_port", str(grpc_management))
    path = effective_properties(source, run_dir, model_store, ports, props)
    server = TorchServe(run_dir=run_dir, properties_path=path, model_store=model_store)
    server.start(names, timeout)
    return server
