"""What ``tsbatch apply`` does to change a live model's batch settings: pure rules, no I/O.

TorchServe 0.12 cannot change ``batchSize`` or ``maxBatchDelay`` of a registered model, and
taking workers away (scaling down) can fail the batch a removed worker was computing. So
only a worker increase is done in place (the scale call); every other change stages a new
version of the model, packaged with the new settings (the archive's model-config.yaml wins
over anything else), makes it the default once it answers, and unregisters the old version
after its queued and in-flight requests are answered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import Enum

from tsbatch.settings.batch import BatchSettings

# The suffix a staged version carries: ``1.0`` -> ``1.0.b16d20w1``; a later apply replaces it
# (``r2`` when the result would be the version served now: a scale in place came between).
STAGED_SUFFIX = re.compile(r"\.b\d+d\d+w\d+(?:r2)?$")


class Step(Enum):
    """One call or wait of an apply, in the order a plan lists them."""

    SCALE = "scale the workers in place (PUT /models/{m}?min_worker=N&synchronous=false)"
    PACKAGE = "package the new version with the new settings into the server's model store"
    REGISTER = "register the new version, its workers starting in the background (POST /models?url=...&synchronous=false)"
    WAIT_READY = "wait until every worker is READY (describe, polled)"
    PROBE = "send one request to /predictions/{m}/{new version}: it must answer 200"
    SET_DEFAULT = "make the new version the default (PUT /models/{m}/{v}/set-default)"
    DRAIN = "wait until the old version's queue is empty and each of its workers has answered its last batch"
    UNREGISTER = "unregister the old version (DELETE /models/{m}/{old version}) and remove its staged archive"
    VERIFY = "describe the model: the default version must show the new settings"


IN_PLACE = (Step.SCALE, Step.WAIT_READY, Step.VERIFY)
STAGED = (
    Step.PACKAGE,
    Step.REGISTER,
    Step.WAIT_READY,
    Step.PROBE,
    Step.SET_DEFAULT,
    Step.DRAIN,
    Step.UNREGISTER,
    Step.VERIFY,
)


@dataclass(frozen=True)
class ApplyPlan:
    """What one apply will do: no steps when the settings are already served."""

    model: str
    old_version: str
    current: BatchSettings
    wanted: BatchSettings
    steps: tuple[Step, ...]
    new_version: str | None  # None: the old version stays (a scale in place, or nothing)
    reason: str

    def lines(self) -> list[str]:
        """The plan as the command prints it before acting."""
        head = f"{self.model} {self.old_version}: {self.current.label()} -> {self.wanted.label()} ({self.reason})"
        return [head, *(f"  {n}. {step.value}" for n, step in enumerate(self.steps, 1))]


def staged_version(old_version: str, wanted: BatchSettings) -> str:
    """The new version's string: the old one without an earlier apply's suffix, then the settings."""
    base = STAGED_SUFFIX.sub("", old_version)
    version = f"{base}.b{wanted.batch_size}d{wanted.max_batch_delay_ms}w{wanted.workers}"
    return version if version != old_version else f"{version}r2"


def staged_archive(model: str, version: str) -> str:
    """The name of a staged version's archive in the model store: a folder, the archive
    unpacked (TorchServe registers a folder of its store without unzipping it on a network
    thread, which stalls every client on that thread for seconds)."""
    return f"{model}-{version}"


def is_staged(model: str, version: str, archive: str) -> bool:
    """Whether ``archive`` is one an apply staged (and so may remove once it is unregistered);
    ``.mar`` files are what earlier releases staged."""
    name = staged_archive(model, version)
    return is_staged_version(version) and archive in (name, f"{name}.mar")


def plan_change(model: str, old_version: str, current: BatchSettings, wanted: BatchSettings) -> ApplyPlan:
    """Which steps change ``current`` into ``wanted`` without failing a request."""
    problem = wanted.problem()
    if problem:
        raise ValueError(f"{model}: {problem}")
    plan = ApplyPlan(model, old_version, current, wanted, (), None, "already served")
    if wanted.key == current.key:
        return plan
    same_batching = wanted.changed(workers=current.workers).key == current.key
    if same_batching and (wanted.workers or 0) > (current.workers or 0):
        return replace(plan, steps=IN_PLACE, reason="more workers only: TorchServe scales in place")
    reason = (
        "fewer workers: a scale-down can fail the batch a removed worker is computing"
        if same_batching
        else "TorchServe cannot change batchSize or maxBatchDelay of a registered version"
    )
    new_version = staged_version(old_version, wanted)
    return replace(plan, steps=STAGED, new_version=new_version, reason=f"{reason}: staged as {new_version}")


def is_staged_version(version: str) -> bool:
    return STAGED_SUFFIX.search(version) is not None


@dataclass(frozen=True)
class Leftovers:
    """What an apply that stopped midway left registered, and what a new apply does about it."""

    remove: tuple[str, ...]  # versions to drain and unregister (apply staged them, or staged the default)
    foreign: tuple[str, ...]  # other versions apply did not make: left to the operator

    def problem(self, model: str) -> str | None:
        if not self.foreign:
            return None
        return (
            f"{model} has other versions registered that no apply staged ({list(self.foreign)}): "
            "apply changes a model served by one version; unregister them first"
        )


def leftovers(default: str, others: list[str]) -> Leftovers:
    """The non-default versions an apply that stopped midway left: a staged version never
    switched to (stopped before set-default), or the old one beside a staged default (stopped
    during the drain). No client's unversioned request reaches them; both go."""
    removable = tuple(v for v in others if is_staged_version(v) or is_staged_version(default))
    return Leftovers(removable, tuple(v for v in others if v not in removable))


def orphan_archives(model: str, files: list[str], registered: list[str]) -> list[str]:
    """Staged archives of ``model`` in the store (folders, or ``.mar`` files of earlier
    releases) that no registered version serves."""
    prefix = f"{model}-"
    versions = {name: name[len(prefix) :].removesuffix(".mar") for name in files if name.startswith(prefix)}
    return sorted(
        name for name, version in versions.items() if is_staged_version(version) and version not in registered
    )
