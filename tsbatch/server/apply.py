"""``tsbatch apply``: change batchSize, maxBatchDelay and workers of a model on a running
TorchServe without failing a request (the steps: :mod:`tsbatch.server.apply_plan`).

What TorchServe 0.12 does that the steps rely on: a registered version keeps the default
until set-default moves it (new requests then queue for the new version, those already
queued stay with the old one); unregistering or scaling down a version whose worker is
computing a batch loses that batch (the worker's jobs are failed with "Worker died." or
put back on a queue nobody serves any more), so the old version is unregistered only once
its queue is empty and a request sent behind the queue has come back. Registration needs
``enable_model_api=true``; every call needs the management key.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import PackageError, package
from tsbatch.config.properties import update_model_settings
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.apply_plan import LiveSettings, Plan, Step, is_staged, plan_change, staged_archive
from tsbatch.server.process import TorchServe
from tsbatch.workloads.payloads import Payload
from tsbatch.workloads.traffic import traffic_for

POLL_S = 0.2
# After the old queue is empty, the last batches of its other workers may still be running:
# wait at least this long, and twice the slowest request sent behind the queue.
MIN_SETTLE_S = 1.0
ENABLE_MODEL_API = (
    "set enable_model_api=true in the server's config.properties and restart it (`make serve`); "
    "docs/live-settings.md says what that opens and how to keep it on loopback"
)


class ApplyError(RuntimeError):
    """An apply stopped; the message says what the server answered, what state it is in and what to do."""


@dataclass
class ApplyReport:
    """What an apply did and how long each step took (seconds, in plan order)."""

    plan: Plan
    timings: dict[Step, float] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return sum(self.timings.values())

    @property
    def version(self) -> str:
        """The version serving once the apply is done."""
        return self.plan.new_version or self.plan.old_version

    def lines(self) -> list[str]:
        steps = ", ".join(f"{step.name.lower()} {seconds:.1f}s" for step, seconds in self.timings.items())
        return [f"[apply] {self.plan.model} {self.version} serves {self.plan.target.label()}: "
                f"{self.seconds:.1f}s ({steps or 'nothing to do'})"]  # fmt: skip


class Management:
    """The management and inference calls of an apply; every refusal becomes an ApplyError."""

    def __init__(self, server: TorchServe, timeout_s: float) -> None:
        self.server, self.timeout_s = server, timeout_s

    def call(self, method: str, path: str, ok: tuple[int, ...] = (200,), **params: Any) -> Any:
        url = f"{self.server.url('management')}{path}"
        try:
            headers = self.server.headers("management")
        except (OSError, KeyError, ValueError) as exc:
            raise ApplyError(
                f"no management key in {self.server.key_file} ({type(exc).__name__}: {exc}): name the run "
                "directory of the running server with --run-dir"
            ) from None
        try:
            response = requests.request(method, url, params=params, headers=headers, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise ApplyError(
                f"no answer from the management API at {url} ({type(exc).__name__}: {exc}): is the server "
                f"running (`tsbatch status --run-dir {self.server.run_dir}`)?"
            ) from None
        if response.status_code in ok:
            return response.json() if response.content else None
        text = response.text.strip()[:300]
        if response.status_code in (400, 401, 403) and "token" in text.lower():
            raise ApplyError(
                f"the management API refused the key (HTTP {response.status_code}: {text}): apply sends "
                f"the 'management' key of {self.server.key_file}; name the run directory of the running "
                "server with --run-dir (`tsbatch serve` writes .serve/key_file.json)"
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

    def predict(self, model: str, version: str, payload: Payload) -> tuple[int, float]:
        """One request to that version: its status and seconds."""
        url = f"{self.server.url('inference')}/predictions/{model}/{version}"
        headers = {**self.server.headers("inference"), "Content-Type": payload.content_type}
        begin = time.monotonic()
        try:
            status = requests.post(
                url, data=payload.body, headers=headers, timeout=self.timeout_s
            ).status_code
        except requests.RequestException:
            status = 0
        return status, time.monotonic() - begin

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


def stage_archive(server: TorchServe, manifest: Manifest, plan: Plan) -> str:
    """Package the model as ``plan.new_version`` with the target settings; its file name in the store."""
    assert plan.new_version is not None
    spec = manifest.model(plan.model).with_settings(version=plan.new_version)
    name = staged_archive(plan.model, plan.new_version)
    with tempfile.TemporaryDirectory(prefix=f"apply-{plan.model}-") as work:
        properties = Path(work) / "config.properties"
        shutil.copy(server.properties_path, properties)  # the running server's other settings
        update_model_settings(properties, plan.model, plan.target.properties())
        staging = Manifest(
            models=manifest.models, build_dir=manifest.build_dir, model_store=Path(work) / "store"
        )
        try:
            built = package(spec, staging, properties, force=True)
        except (PackageError, ValueError) as exc:
            raise ApplyError(f"packaging {plan.model} {plan.new_version} failed: {exc}") from None
        shutil.move(built, server.model_store / name)
    return name


def drain(api: Management, model: str, version: str, workers: int, probe: Payload) -> None:
    """Until the old version has answered everything it took: its queue empty, then one request
    per worker sent behind it answered (with one worker, FIFO makes that exact), then a settle."""
    api.wait(f"the queue of {model} {version} to empty", lambda: pending(api.describe(model, version)) == 0)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        answers = list(pool.map(lambda _: api.predict(model, version, probe), range(workers)))
    time.sleep(max(MIN_SETTLE_S, 2 * max(seconds for _, seconds in answers)))
    api.wait(
        f"the queue of {model} {version} to stay empty", lambda: pending(api.describe(model, version)) == 0
    )


def apply_settings(
    server: TorchServe,
    model: str,
    settings: LiveSettings,
    *,
    manifest: Manifest | None = None,
    probe: Payload | None = None,
    update_properties: Path | None = None,
    timeout_s: float = 300,
    log: Callable[[str], None] = print,
) -> ApplyReport:
    """Serve ``settings`` for ``model`` on the running ``server`` without failing a request.

    ``probe`` is the request that must answer 200 from the new version (default: the first
    of the toolkit's pool for the model's kind); ``update_properties`` gets the new settings
    once the apply is done (comments kept). Raises :class:`ApplyError` having changed nothing
    when the server refuses before the switch, and saying what is left when it stops after.
    """
    api = Management(server, timeout_s)
    entry = api.describe(model)
    plan = plan_change(model, entry["modelVersion"], LiveSettings.described(entry), settings)
    for line in plan.lines():
        log(f"[apply] {line}")
    report = ApplyReport(plan)
    if not plan.steps:
        return report
    others = [v for v in api.versions(model) if v != plan.old_version]
    if others:
        raise ApplyError(
            f"{model} has other versions registered ({others}), as an apply that stopped midway leaves: "
            f"unregister them first (curl -X DELETE -H 'Authorization: Bearer <management key>' "
            f"{server.url('management')}/models/{model}/<version>)"
        )
    if plan.new_version is not None:
        api.require_model_api()
    manifest = manifest or load_manifest()
    probe = probe or traffic_for(model, manifest=manifest).payloads[0]
    state = {"archive": ""}

    def run(step: Step, action: Callable[[], object]) -> None:
        begin = time.monotonic()
        action()
        report.timings[step] = time.monotonic() - begin
        log(f"[apply]   {step.name.lower()}: {report.timings[step]:.1f}s")

    new, old = plan.new_version, plan.old_version
    actions: dict[Step, Callable[[], object]] = {
        Step.SCALE: lambda: api.call(
            "PUT",
            f"/models/{model}",
            min_worker=settings.workers,
            max_worker=settings.workers,
            synchronous="true",
        ),
        Step.PACKAGE: lambda: state.update(archive=stage_archive(server, manifest, plan)),
        Step.REGISTER: lambda: api.call(
            "POST",
            "/models",
            url=state["archive"],
            model_name=model,
            initial_workers=settings.workers,
            synchronous="true",
        ),
        Step.WAIT_READY: lambda: api.wait(
            f"{settings.workers} READY workers of {model} {new}",
            lambda: ready_workers(api.describe(model, new)) >= settings.workers,
        ),
        Step.PROBE: lambda: probe_new(api, model, str(new), probe),
        Step.SET_DEFAULT: lambda: api.call("PUT", f"/models/{model}/{new}/set-default"),
        Step.DRAIN: lambda: drain(api, model, old, plan.current.workers, probe),
        Step.UNREGISTER: lambda: unregister(api, server, model, old, entry.get("modelUrl", "")),
        Step.VERIFY: lambda: verify(api, model, report.version, settings),
    }
    for step in plan.steps:
        try:
            run(step, actions[step])
        except ApplyError as exc:
            raise ApplyError(
                f"{step.name.lower()}: {exc}\n{left_behind(api, server, plan, step, state['archive'])}"
            ) from None
    if update_properties is not None:
        update_model_settings(update_properties, model, settings.properties())
        log(f"[apply] {update_properties}: {model} {settings.properties()}")
    return report


def probe_new(api: Management, model: str, version: str, probe: Payload) -> None:
    status, seconds = api.predict(model, version, probe)
    if status != 200:
        raise ApplyError(
            f"{model} {version} answered HTTP {status} to a {probe.description} in {seconds:.1f}s"
        )


def unregister(api: Management, server: TorchServe, model: str, version: str, archive: str) -> None:
    api.call("DELETE", f"/models/{model}/{version}")
    if is_staged(model, version, archive):  # an earlier apply's archive: nothing serves it now
        (server.model_store / archive).unlink(missing_ok=True)


def verify(api: Management, model: str, version: str, settings: LiveSettings) -> None:
    entry = api.describe(model)
    if entry["modelVersion"] != version or LiveSettings.described(entry) != settings:
        raise ApplyError(
            f"the default is {entry['modelVersion']} with {LiveSettings.described(entry).label()}, "
            f"not {version} with {settings.label()}"
        )


def left_behind(api: Management, server: TorchServe, plan: Plan, failed: Step, archive: str) -> str:
    """Undo what a failure before the switch left (the new version, its archive); after the
    switch, say what still serves."""
    if plan.new_version is None or plan.steps.index(failed) >= plan.steps.index(Step.SET_DEFAULT):
        kept = "" if plan.new_version is None else f"; {plan.new_version} is the default"
        return f"{plan.model} {plan.old_version} is still registered{kept}: check with `tsbatch status`"
    if failed not in (Step.PACKAGE, Step.REGISTER):
        try:
            api.call("DELETE", f"/models/{plan.model}/{plan.new_version}")
        except ApplyError as exc:
            return f"the new version {plan.new_version} could not be unregistered ({exc}); {plan.old_version} serves"
    if archive:
        (server.model_store / archive).unlink(missing_ok=True)
    return f"nothing changed: {plan.model} {plan.old_version} serves as before"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Change batchSize, maxBatchDelay and workers of a model on a running TorchServe without "
        "failing a request; settings left out stay as served. More workers are added in place; any other change "
        "becomes a new version, made the default once it answers, the old one removed once drained "
        "(needs enable_model_api=true: docs/live-settings.md)."
    )
    parser.add_argument("--model", required=True, help="the model to change")
    parser.add_argument("--batch-size", type=int, help="the new batchSize")
    parser.add_argument("--max-batch-delay", type=int, help="the new maxBatchDelay in ms")
    parser.add_argument("--workers", type=int, help="the new worker count (minWorkers = maxWorkers)")
    parser.add_argument("--run-dir", type=Path, default=REPO_ROOT / ".serve",
                        help="where the running server keeps its config and key file (default .serve)")  # fmt: skip
    parser.add_argument("--properties", type=Path, default=DEFAULT_PROPERTIES,
                        help="config.properties to write the new settings into (default config.properties)")  # fmt: skip
    parser.add_argument("--no-properties", action="store_true", help="leave config.properties as it is")
    parser.add_argument(
        "--timeout", type=float, default=300, help="seconds any one step may take (default 300)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    server = TorchServe.from_run_dir(args.run_dir)
    if not server.properties_path.exists():
        print(f"[apply] FAILED: no running server's config in {args.run_dir}: start one with "
              "`tsbatch serve` or name its run directory with --run-dir", file=sys.stderr)  # fmt: skip
        return 1
    try:
        current = LiveSettings.described(Management(server, args.timeout).describe(args.model))
        target = current.changed(args.batch_size, args.max_batch_delay, args.workers)
        report = apply_settings(
            server,
            args.model,
            target,
            update_properties=None if args.no_properties else args.properties,
            timeout_s=args.timeout,
        )
    except (ApplyError, ValueError) as exc:
        print(f"[apply] FAILED: {exc}", file=sys.stderr)
        return 1
    print("\n".join(report.lines()))
    return 0
