"""``tsbatch apply``: change batchSize, maxBatchDelay and workers of a model on a running
TorchServe without failing a request (the steps: :mod:`tsbatch.server.apply_plan`).

What TorchServe 0.12 does that the steps rely on: a registered version keeps the default
until set-default moves it (new requests then queue for the new version, those already
queued stay with the old one); unregistering or scaling down a version whose worker is
computing a batch loses that batch (the worker's jobs are failed with "Worker died."), so
the old version is unregistered only once its queue is empty and each of its workers has
answered its last batch (:mod:`tsbatch.server.worker_batches`). Register and scale calls are
asynchronous: a synchronous one holds one of the frontend's network threads until the
workers are up, stalling every model's clients on it. One apply runs at a time per server
(:mod:`tsbatch.server.apply_lock`); one finds what an earlier one left and clears it.
Registration needs ``enable_model_api=true``; every call needs the management key.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import PackageError, package
from tsbatch.archive.traffic import traffic_for
from tsbatch.config.properties import model_settings, read_properties, update_model_settings
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.apply_api import POLL_S, ApplyError, Management, pending, ready_workers
from tsbatch.server.apply_lock import ApplyLocked, apply_lock, holder_text
from tsbatch.server.apply_plan import (
    ApplyPlan,
    Step,
    is_staged,
    leftovers,
    orphan_archives,
    plan_change,
    staged_archive,
)
from tsbatch.server.process import TorchServe
from tsbatch.server.worker_batches import BatchLog
from tsbatch.settings.batch import DEFAULT_RESPONSE_TIMEOUT_S, TUNED_KEYS, BatchSettings
from tsbatch.workloads.payloads import Payload

__all__ = ["ApplyError", "ApplyReport", "apply_settings", "main"]


@dataclass
class ApplyReport:
    """What an apply did and how long each step took (seconds, in plan order)."""

    plan: ApplyPlan
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
        return [f"[apply] {self.plan.model} {self.version} serves {self.plan.wanted.label()}: "
                f"{self.seconds:.1f}s ({steps or 'nothing to do'})"]  # fmt: skip


def stage_archive(server: TorchServe, manifest: Manifest, plan: ApplyPlan) -> str:
    """Package the model as ``plan.new_version`` with the wanted settings; its file name in the store."""
    assert plan.new_version is not None
    spec = manifest.model(plan.model).with_settings(version=plan.new_version)
    name = staged_archive(plan.model, plan.new_version)
    with tempfile.TemporaryDirectory(prefix=f"apply-{plan.model}-") as work:
        properties = Path(work) / "config.properties"
        shutil.copy(server.properties_path, properties)  # the running server's other settings
        update_model_settings(properties, plan.model, plan.wanted.entry(TUNED_KEYS))
        staging = Manifest(
            models=manifest.models, build_dir=manifest.build_dir, model_store=Path(work) / "store"
        )
        try:
            built = package(spec, staging, properties, force=True)
        except (PackageError, ValueError) as exc:
            raise ApplyError(f"packaging {plan.model} {plan.new_version} failed: {exc}") from None
        with zipfile.ZipFile(built) as archive:
            archive.extractall(Path(work) / name)
        remove_staged(server.model_store / name)
        shutil.move(Path(work) / name, server.model_store / name)
    return name


def remove_staged(path: Path) -> None:
    """A staged archive: a folder (or a ``.mar`` file an earlier release staged)."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def drain(api: Management, batches: BatchLog, model: str, version: str, log: Callable[[str], None]) -> None:
    """Until the old version has answered everything it took: its queue empty for longer than
    its batch delay (a worker filling a batch holds jobs the queue no longer shows), and each of
    its workers' last batch answered, as the frontend's log shows. A worker the log does not
    show (INFO hidden, or rotated away) is waited for up to the model's responseTimeout, after
    which TorchServe itself fails any batch still running."""
    described = BatchSettings.described(api.describe(model, version))
    window = described.max_batch_delay_ms / 1000 + POLL_S
    deadline = time.monotonic() + api.timeout_s
    quiet_since: float | None = None
    warned = False
    while True:
        entry = api.describe(model, version)
        now = time.monotonic()
        quiet_since = None if pending(entry) else (quiet_since or now)
        workers = worker_ids(entry)
        computing = batches.computing(workers)
        unseen = batches.unseen(workers)
        if quiet_since is not None and now - quiet_since >= window:
            if not computing:
                return
            if unseen and not warned:
                log(f"[apply]   {batches.path} shows no batch of worker(s) {unseen} of {model} {version} "
                    f"(INFO lines of org.pytorch.serve.wlm.WorkerThread hidden or rotated): waiting the "
                    f"responseTimeout ({described.response_timeout_s} s) instead")  # fmt: skip
                warned = True
            if set(computing) <= set(unseen) and now - quiet_since >= float(
                described.response_timeout_s or DEFAULT_RESPONSE_TIMEOUT_S
            ):
                return
        if now > deadline:
            raise ApplyError(
                f"timed out after {api.timeout_s:.0f}s waiting for {model} {version} to answer what it "
                f"took ({pending(entry)} queued, workers {computing} computing)"
            )
        time.sleep(POLL_S)


def worker_ids(entry: dict[str, Any]) -> list[str]:
    """The workers' ids in a describe answer (each one's port, as its thread's name says)."""
    return [str(worker["id"]) for worker in entry.get("workers", [])]


def retire(api: Management, server: TorchServe, model: str, version: str, log: Callable[[str], None]) -> None:
    """Drain a version no unversioned request reaches any more, unregister it, remove its archive
    when an apply staged it."""
    entry = api.describe(model, version)
    batches = BatchLog.following(server.frontend_log, model, version, worker_ids(entry))
    drain(api, batches, model, version, log)
    unregister(api, server, model, version, entry.get("modelUrl", ""))


def clear_leftovers(api: Management, server: TorchServe, model: str, log: Callable[[str], None]) -> None:
    """Finish or undo what an apply that stopped midway left: its extra version, its archives."""
    default = api.describe(model)["modelVersion"]
    left = leftovers(default, [v for v in api.versions(model) if v != default])
    problem = left.problem(model)
    if problem:
        raise ApplyError(
            f"{problem} (curl -X DELETE -H 'Authorization: Bearer <management key>' "
            f"{server.client.model_url(model, '<version>')})"
        )
    for version in left.remove:
        log(f"[apply] an earlier apply stopped midway: {model} {version} is registered beside the default "
            f"{default}; draining and unregistering it")  # fmt: skip
        retire(api, server, model, version, log)
    if server.model_store.is_dir():
        files = [path.name for path in server.model_store.iterdir()]
        for name in orphan_archives(model, files, api.versions(model)):
            log(f"[apply] removing {name} from the model store: no registered version serves it")
            remove_staged(server.model_store / name)


def record_served(api: Management, model: str, path: Path, log: Callable[[str], None]) -> None:
    """Write what the server serves now into ``path`` (comments kept), so the next restart
    serves the same; nothing is written when the file already says so."""
    served = BatchSettings.described(api.describe(model)).entry(TUNED_KEYS)
    written = model_settings(read_properties(path)).get(model, {}) if path.exists() else {}
    if any(written.get(key) != value for key, value in served.items()):
        update_model_settings(path, model, served)
        log(f"[apply] {path}: {model} {served}")


def apply_settings(
    server: TorchServe,
    model: str,
    settings: BatchSettings,
    *,
    manifest: Manifest | None = None,
    probe: Payload | None = None,
    update_properties: Path | None = None,
    timeout_s: float = 300,
    wait_s: float = 0,
    log: Callable[[str], None] = print,
) -> ApplyReport:
    """Serve ``settings`` for ``model`` on the running ``server`` without failing a request.

    ``probe`` is the request that must answer 200 from the new version (default: the first
    of the toolkit's pool for the model's kind); ``update_properties`` gets the settings
    served once the apply ends, whatever the outcome (comments kept). ``wait_s``: how long to
    wait for another apply on the same server to finish. Raises :class:`ApplyError` having
    changed nothing when the server refuses before the switch, and saying what is left when
    it stops after.
    """
    api = Management(server, timeout_s)
    try:
        with apply_lock(server.run_dir, wait_s) as previous:
            if previous:
                log(f"[apply] the apply of {holder_text(previous)} did not finish: clearing what it left")
            try:
                clear_leftovers(api, server, model, log)
                return run_plan(api, server, model, settings, manifest, probe, log)
            finally:
                if update_properties is not None:
                    try:
                        record_served(api, model, update_properties, log)
                    except ApplyError as exc:
                        log(f"[apply] {update_properties} left as it was: {exc}")
    except ApplyLocked as exc:
        raise ApplyError(str(exc)) from None


def run_plan(
    api: Management,
    server: TorchServe,
    model: str,
    settings: BatchSettings,
    manifest: Manifest | None,
    probe: Payload | None,
    log: Callable[[str], None],
) -> ApplyReport:
    entry = api.describe(model)
    plan = plan_change(model, entry["modelVersion"], BatchSettings.described(entry), settings)
    for line in plan.lines():
        log(f"[apply] {line}")
    report = ApplyReport(plan)
    if not plan.steps:
        return report
    if plan.new_version is not None:
        api.require_model_api()
    manifest = manifest or load_manifest()
    probe = probe or traffic_for(model, manifest=manifest).payloads[0]
    state = {"archive": ""}
    new, old = plan.new_version, plan.old_version
    # Followed from before the switch: every batch the old workers start from now on is seen.
    batches = BatchLog.following(server.frontend_log, model, old, worker_ids(api.describe(model, old)))

    def run(step: Step, action: Callable[[], object]) -> None:
        begin = time.monotonic()
        action()
        report.timings[step] = time.monotonic() - begin
        log(f"[apply]   {step.name.lower()}: {report.timings[step]:.1f}s")

    actions: dict[Step, Callable[[], object]] = {
        Step.SCALE: lambda: api.scale(model, settings.workers),
        Step.PACKAGE: lambda: state.update(archive=stage_archive(server, manifest, plan)),
        Step.REGISTER: lambda: api.register(state["archive"], model, settings.workers),
        Step.WAIT_READY: lambda: api.wait(
            f"{settings.workers} READY workers of {model} {report.version}",
            lambda: ready_workers(api.describe(model, report.version)) >= settings.workers,
        ),
        Step.PROBE: lambda: probe_new(api, model, str(new), probe),
        Step.SET_DEFAULT: lambda: api.set_default(model, str(new)),
        Step.DRAIN: lambda: drain(api, batches, model, old, log),
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
    return report


def probe_new(api: Management, model: str, version: str, probe: Payload) -> None:
    status, seconds, text = api.predict(model, version, probe)
    if status != 200:
        raise ApplyError(
            f"{model} {version} answered HTTP {status} to a {probe.description} in {seconds:.1f}s: {text}"
        )


def unregister(api: Management, server: TorchServe, model: str, version: str, archive: str) -> None:
    api.unregister(model, version)
    if is_staged(model, version, archive):  # an earlier apply's archive: nothing serves it now
        remove_staged(server.model_store / archive)


def verify(api: Management, model: str, version: str, settings: BatchSettings) -> None:
    entry = api.describe(model)
    served = BatchSettings.described(entry)
    if entry["modelVersion"] != version or served.key != settings.key:
        raise ApplyError(
            f"the default is {entry['modelVersion']} with {served.label()}, "
            f"not {version} with {settings.label()}"
        )


def left_behind(api: Management, server: TorchServe, plan: ApplyPlan, failed: Step, archive: str) -> str:
    """Undo what a failure before the switch left (the new version, its archive); after the
    switch, say what still serves (the next apply drains and removes the old version)."""
    if plan.new_version is None or plan.steps.index(failed) >= plan.steps.index(Step.SET_DEFAULT):
        kept = "" if plan.new_version is None else f"; {plan.new_version} is the default"
        return (f"{plan.model} {plan.old_version} is still registered{kept}: the next `tsbatch apply` "
                "finishes the change (check with `tsbatch status`)")  # fmt: skip
    if failed not in (Step.PACKAGE, Step.REGISTER):
        try:
            api.unregister(plan.model, plan.new_version)
        except ApplyError as exc:
            return f"the new version {plan.new_version} could not be unregistered ({exc}); {plan.old_version} serves"
    if archive:
        remove_staged(server.model_store / archive)
    return f"nothing changed: {plan.model} {plan.old_version} serves as before"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Change batchSize, maxBatchDelay and workers of a model on a running TorchServe without "
        "failing a request; settings left out stay as served. More workers are added in place; any other change "
        "becomes a new version, made the default once it answers, the old one removed once drained "
        "(needs enable_model_api=true: docs/live-settings.md); one apply at a time."
    )
    parser.add_argument("--model", required=True, help="the model to change")
    parser.add_argument("--batch-size", type=int, help="the new batchSize")
    parser.add_argument("--max-batch-delay", type=int, help="the new maxBatchDelay in ms")
    parser.add_argument("--workers", type=int, help="the new worker count (minWorkers = maxWorkers)")
    parser.add_argument("--run-dir", type=Path, default=REPO_ROOT / ".serve",
                        help="where the running server keeps its config and key file (default .serve)")  # fmt: skip
    parser.add_argument("--properties", type=Path, default=DEFAULT_PROPERTIES,
                        help="config.properties to write the served settings into (default config.properties)")  # fmt: skip
    parser.add_argument("--no-properties", action="store_true", help="leave config.properties as it is")
    parser.add_argument(
        "--timeout", type=float, default=300, help="seconds any one step may take (default 300)"
    )
    parser.add_argument("--wait", type=float, default=0,
                        help="seconds to wait for another apply on this server to finish (default 0: refuse)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    server = TorchServe.from_run_dir(args.run_dir)
    if not server.properties_path.exists():
        print(f"[apply] FAILED: no running server's config in {args.run_dir}: start one with "
              "`tsbatch serve` or name its run directory with --run-dir", file=sys.stderr)  # fmt: skip
        return 1
    try:
        current = BatchSettings.described(Management(server, args.timeout).describe(args.model))
        wanted = current.changed(args.batch_size, args.max_batch_delay, args.workers)
        report = apply_settings(
            server,
            args.model,
            wanted,
            update_properties=None if args.no_properties else args.properties,
            timeout_s=args.timeout,
            wait_s=args.wait,
        )
    except (ApplyError, ValueError) as exc:
        print(f"[apply] FAILED: {exc}", file=sys.stderr)
        return 1
    print("\n".join(report.lines()))
    return 0
