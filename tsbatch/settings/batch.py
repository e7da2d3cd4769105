"""One model's batch settings, the one value every part passes around: read from a
config.properties ``models=`` entry (a key left out takes what TorchServe 0.12 would serve),
from TorchServe's describe answer, from a tuner point, and written back as a ``models=`` entry.

Plain Python and no toolkit import, so the server, the SLA figures, the config checks and the
tuner all share it without importing one another. The text of config.properties is read and
edited by :mod:`tsbatch.config.properties`, which hands each entry here as a mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from batchkit.config import ModelConfig

BATCH_KEYS = ("minWorkers", "maxWorkers", "batchSize", "maxBatchDelay", "responseTimeout")
# What each archive repeats from its models= entry: TorchServe's batch keys and the
# toolkit's torchThreads (TorchServe lets the archive win, so the archive must say the same).
ARCHIVE_KEYS = (*BATCH_KEYS, "torchThreads")
# What the tuner searches and ``tsbatch apply`` changes (one worker count: min = max).
TUNED_KEYS = ("batchSize", "maxBatchDelay", "minWorkers", "maxWorkers")
# What TorchServe 0.12 serves for a key a models= entry leaves out, loading load_models'
# archives (ModelManager.registerModel; ConfigManager.getDefaultResponseTimeout and
# getDefaultWorkers): batchSize 1, maxBatchDelay 100 ms, responseTimeout default_response_timeout
# (120 s when unset), workers default_workers_per_model (when unset: one per GPU, else one per
# CPU core of the serving machine, so nothing is baked). torchThreads: the handler's default.
TORCHSERVE_DEFAULTS = {"batchSize": 1, "maxBatchDelay": 100}
DEFAULT_RESPONSE_TIMEOUT_S = 120
DEFAULT_TORCH_THREADS: int = ModelConfig.torch_threads
SERVE_TIME_WORKERS = "no default_workers_per_model: TorchServe starts one per GPU, else one per CPU core of the serving machine"
# TorchServe 0.12 reads a model's queue size from its archive's model-config.yaml only (in
# models= it ignores the key): the build bakes the entry's value in, and a model without one
# queues up to job_queue_size (TorchServe's default when that is unset too).
QUEUE_KEY = "jobQueueSize"
DEFAULT_JOB_QUEUE_SIZE = 100


class SettingsError(ValueError):
    """A models= entry the toolkit cannot serve; the message says which key and why."""


@dataclass(frozen=True)
class WorkerKey:
    """An optional key of a model's ``models=`` entry that only some kinds' workers read (the
    image kind's decode pool), baked into the handler config's ``field`` when set."""

    name: str  # in config.properties, e.g. decodeThreads
    field: str  # the handler config field, e.g. decode_threads
    default: Any  # what the worker does when the entry leaves it out
    problem: Callable[[Any], str | None]  # why a value is wrong, or None
    part: str  # the part of the worker it sets, for "a text model's worker has no <part>"
    threads: bool = False  # a thread pool beside torchThreads: counted in the CPU budget


def whole_number_problem(least: int) -> Callable[[Any], str | None]:
    """The check of a setting that must be a whole number of at least ``least``."""

    def problem(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"must be a whole number of at least {least}, got {value!r}"
        return None

    return problem


# The deadline budget every kind's worker reads (batchkit.deadlines; 0: off), counted from the
# arrival stamp a proxy sets; each kind's own keys come after it (Kind.all_worker_keys).
DEADLINE_BUDGET = WorkerKey(
    "deadlineBudgetMs", "deadline_budget_ms", 0, whole_number_problem(0), "deadline budget"
)
SHARED_WORKER_KEYS = (DEADLINE_BUDGET,)


def queue_problem(entry: Mapping[str, Any]) -> str | None:
    """What is wrong with a model entry's jobQueueSize, or None (absent: nothing)."""
    return whole_number_problem(1)(entry[QUEUE_KEY]) if QUEUE_KEY in entry else None


@dataclass(frozen=True)
class Defaulted:
    """An ``ARCHIVE_KEYS`` key a models= entry leaves out: the value it takes (None: TorchServe
    picks it when it starts, and the archive leaves it out too) and where that comes from."""

    key: str
    value: int | None
    source: str

    def taken(self) -> str:
        baked = "not baked" if self.value is None else f"{self.value} baked into the archive"
        return f"{baked} ({self.source})"

    def describe(self) -> str:
        return f"{self.key} left out: {self.taken()}"


def defaults_for(properties: Mapping[str, str], entry: Mapping[str, Any]) -> list[Defaulted]:
    """The value TorchServe 0.12 would serve for each ``ARCHIVE_KEYS`` key ``entry`` leaves out."""
    found = []
    for key in (key for key in ARCHIVE_KEYS if key not in entry):
        if key in TORCHSERVE_DEFAULTS:
            found.append(Defaulted(key, TORCHSERVE_DEFAULTS[key], "TorchServe's default"))
        elif key == "responseTimeout":
            text = properties.get("default_response_timeout", "").strip()
            found.append(
                Defaulted(key, int(text), "default_response_timeout")
                if text.isdigit()
                else Defaulted(
                    key, DEFAULT_RESPONSE_TIMEOUT_S, "TorchServe's default; no default_response_timeout"
                )
            )
        elif key == "torchThreads":
            found.append(Defaulted(key, DEFAULT_TORCH_THREADS, "the handler's default"))
        else:
            text = properties.get("default_workers_per_model", "").strip()
            workers = int(text) if text.isdigit() and int(text) > 0 else None
            found.append(
                Defaulted(key, workers, "default_workers_per_model" if workers else SERVE_TIME_WORKERS)
            )
    return found


def with_defaults(properties: Mapping[str, str], entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` with the value TorchServe would serve for each key it leaves out (where known)."""
    taken = {d.key: d.value for d in defaults_for(properties, entry) if d.value is not None}
    return {**entry, **taken}


# Each field's key in a models= entry (and in a describe answer), in the order entries are written.
ENTRY_KEYS = {
    "batch_size": "batchSize",
    "max_batch_delay_ms": "maxBatchDelay",
    "min_workers": "minWorkers",
    "max_workers": "maxWorkers",
    "response_timeout_s": "responseTimeout",
    "torch_threads": "torchThreads",
}


@dataclass(frozen=True)
class BatchSettings:
    """One model's batching, its workers and the worker keys it sets. None: not said where the
    settings came from (a describe answer has no queue size, a tuner point no timeout)."""

    batch_size: int = TORCHSERVE_DEFAULTS["batchSize"]
    max_batch_delay_ms: int = TORCHSERVE_DEFAULTS["maxBatchDelay"]
    min_workers: int | None = None
    max_workers: int | None = None
    response_timeout_s: int | None = None
    torch_threads: int | None = None
    job_queue_size: int | None = None
    worker: tuple[tuple[str, Any], ...] = ()  # the kind's worker keys set, e.g. (("decodeThreads", 4),)

    @classmethod
    def for_point(cls, batch_size: int, delay_ms: int, workers: int, **worker: Any) -> BatchSettings:
        """The settings the tuner tries and ``tsbatch apply`` serves: one worker count (min = max),
        and the worker keys given that are not None (``decodeThreads=4``)."""
        return cls(
            batch_size,
            delay_ms,
            workers,
            workers,
            worker=tuple((k, v) for k, v in worker.items() if v is not None),
        )

    @classmethod
    def described(cls, answer: Mapping[str, Any]) -> BatchSettings:
        """The settings in one entry of TorchServe's describe answer (the only parse of it)."""
        timeout = answer.get("responseTimeout")
        return cls(
            int(answer["batchSize"]),
            int(answer["maxBatchDelay"]),
            int(answer["minWorkers"]),
            int(answer["maxWorkers"]),
            None if timeout is None else int(timeout),
        )

    @classmethod
    def configured(
        cls,
        properties: Mapping[str, str],
        model: str,
        entry: Mapping[str, Any],
        worker_keys: Iterable[WorkerKey] = (),
    ) -> BatchSettings:
        """One model's ``models=`` entry, whole numbers, a key left out taking what TorchServe
        would serve (:func:`defaults_for`), with the ``worker_keys`` of its kind it sets; a
        SettingsError names what is wrong."""
        served = with_defaults(properties, entry)
        wrong = [
            key
            for key in ARCHIVE_KEYS
            if key in served and (isinstance(served[key], bool) or not isinstance(served[key], int))
        ]
        if wrong:
            raise SettingsError(f"models.{model}: {wrong} must be whole numbers")
        keys = list(worker_keys)
        for key in keys:
            problem = key.problem(served[key.name]) if key.name in served else None
            if problem:
                raise SettingsError(f"models.{model}.{key.name}: {problem}")
        problem = queue_problem(served)
        if problem:
            raise SettingsError(f"models.{model}.{QUEUE_KEY}: {problem}")
        said = {name: served.get(key) for name, key in ENTRY_KEYS.items()}
        return cls(
            **said,
            job_queue_size=served.get(QUEUE_KEY),
            worker=tuple((key.name, served[key.name]) for key in keys if key.name in served),
        )

    @property
    def workers(self) -> int | None:
        """The worker count TorchServe starts (minWorkers): the one ``apply`` and the tuner set."""
        return self.min_workers

    @property
    def key(self) -> tuple[int, int, int | None]:
        """What the tuner searches and ``apply`` changes: batch size, delay, workers."""
        return (self.batch_size, self.max_batch_delay_ms, self.workers)

    def worker_key(self, name: str, default: Any = None) -> Any:
        """The value of one worker key (``decodeThreads``), or ``default`` when it is not set."""
        return dict(self.worker).get(name, default)

    def with_worker(self, **values: Any) -> BatchSettings:
        """These settings with some worker keys set (``decodeThreads=4``), the others kept."""
        return replace(self, worker=tuple({**dict(self.worker), **values}.items()))

    def changed(
        self, batch_size: int | None = None, max_batch_delay_ms: int | None = None, workers: int | None = None
    ) -> BatchSettings:
        """These settings with the given ones replaced (None keeps a setting; workers set both counts)."""
        return BatchSettings(
            self.batch_size if batch_size is None else batch_size,
            self.max_batch_delay_ms if max_batch_delay_ms is None else max_batch_delay_ms,
            self.min_workers if workers is None else workers,
            self.max_workers if workers is None else workers,
            self.response_timeout_s,
            self.torch_threads,
            self.job_queue_size,
            self.worker,
        )

    def problem(self) -> str | None:
        """Why TorchServe could not serve these settings, or None."""
        if self.batch_size < 1:
            return f"batchSize must be at least 1, got {self.batch_size}"
        if self.max_batch_delay_ms < 0:
            return f"maxBatchDelay must be 0 ms or more, got {self.max_batch_delay_ms}"
        if self.workers is not None and self.workers < 1:
            return f"workers must be at least 1 (0 would stop serving), got {self.workers}"
        return None

    def queue_size(self, properties: Mapping[str, str]) -> int:
        """The most requests the model's queue holds: its jobQueueSize, else job_queue_size."""
        if self.job_queue_size is not None:
            return self.job_queue_size
        text = properties.get("job_queue_size", "").strip()
        return int(text) if text.isdigit() else DEFAULT_JOB_QUEUE_SIZE

    def entry(self, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """As a ``models=`` entry spells them: every setting said (only ``keys``, when given)."""
        values = {ENTRY_KEYS[f.name]: getattr(self, f.name) for f in fields(self) if f.name in ENTRY_KEYS}
        values.update(self.worker)
        if self.job_queue_size is not None:
            values[QUEUE_KEY] = self.job_queue_size
        wanted = None if keys is None else set(keys)
        return {k: v for k, v in values.items() if v is not None and (wanted is None or k in wanted)}

    def label(self) -> str:
        return (
            f"batchSize={self.batch_size}, maxBatchDelay={self.max_batch_delay_ms} ms, workers={self.workers}"
        )
