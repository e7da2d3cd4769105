"""Read and edit TorchServe's ``config.properties`` (Java properties) without losing comments.

TorchServe reads the file with ``java.util.Properties``; this module follows the same
rules for what we need: ``#``/``!`` comments, ``key=value`` / ``key: value`` /
``key value``, and backslash line continuations (used by the multi-line ``models=`` JSON).
Edits replace one logical entry in place and keep every other line byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchkit.config import ModelConfig

BATCH_KEYS = ("minWorkers", "maxWorkers", "batchSize", "maxBatchDelay", "responseTimeout")
# What each archive repeats from its models= entry: TorchServe's batch keys and the
# toolkit's torchThreads (TorchServe lets the archive win, so the archive must say the same).
ARCHIVE_KEYS = (*BATCH_KEYS, "torchThreads")
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
# TorchServe's three APIs and the keys that hold their addresses.
ADDRESS_KEYS = {
    "inference": "inference_address",
    "management": "management_address",
    "metrics": "metrics_address",
}


def settings_for(batch_size: int, delay_ms: int, workers: int) -> dict[str, int]:
    """One model's batch settings as its ``models=`` entry spells them (min = max workers),
    for the tuner's points and winners and for ``tsbatch apply``."""
    return {"batchSize": batch_size, "maxBatchDelay": delay_ms, "minWorkers": workers, "maxWorkers": workers}


class PropertiesError(ValueError):
    """config.properties cannot be understood; the message says where and why."""


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


@dataclass(frozen=True)
class Entry:
    key: str
    value: str
    first_line: int  # 0-based index of the entry's first physical line
    last_line: int  # inclusive


def _ends_with_continuation(line: str) -> bool:
    stripped = line.rstrip("\r\n")
    backslashes = len(stripped) - len(stripped.rstrip("\\"))
    return backslashes % 2 == 1


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        char = match.group(1)
        if char.startswith("u"):
            return chr(int(char[1:], 16))
        return _ESCAPES.get(char, char)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", replace, text)


def _split_key_value(logical: str) -> tuple[str, str]:
    index = 0
    while index < len(logical):
        char = logical[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key = logical[:index]
    rest = logical[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_entries(text: str) -> list[Entry]:
    """All key/value entries of a properties text, with their physical line spans."""
    lines = text.splitlines()
    entries: list[Entry] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.lstrip(" \t\f")
        if not stripped or stripped[0] in "#!":
            index += 1
            continue
        first = index
        parts = [stripped]
        while _ends_with_continuation(parts[-1]) and index + 1 < len(lines):
            parts[-1] = parts[-1].rstrip("\r\n")[:-1]
            index += 1
            parts.append(lines[index].lstrip(" \t\f"))
        if _ends_with_continuation(parts[-1]):
            parts[-1] = parts[-1][:-1]
        key, value = _split_key_value("".join(parts))
        entries.append(Entry(key=key, value=value, first_line=first, last_line=index))
        index += 1
    return entries


def read_properties(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for entry in parse_entries(path.read_text()):
        values[entry.key] = entry.value
    return values


def load_models(properties: Mapping[str, str]) -> list[str] | None:
    """The model names ``load_models`` asks TorchServe to load at start, as TorchServe reads
    it: comma-separated archive names (``.mar`` optional, spaces ignored); None for ``all``
    (every archive in the store); an empty list when the key is absent or empty."""
    names = [name.strip() for name in properties.get("load_models", "").split(",") if name.strip()]
    if any(name.lower() == "all" for name in names):
        return None
    return [name.removesuffix(".mar") for name in names]


def model_settings(properties: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per-model settings from the ``models=`` JSON: ``{name: {batchSize: ..., ...}}``.

    TorchServe keys models by name, then version; we take the default version (or the
    only one) and return its settings, with the toolkit's own keys (``torchThreads``).
    """
    raw = properties.get("models")
    if not raw:
        raise PropertiesError("config.properties has no 'models=' entry with batch settings")
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PropertiesError(
            f"'models=' is not valid JSON ({exc.msg} at character {exc.pos}); "
            "check the commas and that every continued line ends with a backslash"
        ) from exc
    if not isinstance(document, dict):
        raise PropertiesError("'models=' must be a JSON object keyed by model name")
    settings: dict[str, dict[str, Any]] = {}
    for name, versions in document.items():
        if not isinstance(versions, dict) or not versions:
            raise PropertiesError(f"models.{name} must map a version to its settings")
        chosen = versions[default_version(versions)]
        if not isinstance(chosen, dict):
            raise PropertiesError(f"models.{name}: version settings must be a JSON object")
        settings[name] = dict(chosen)
    return settings


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


def archive_entry(
    properties: Mapping[str, str], model: str, worker_keys: Sequence[WorkerKey] = ()
) -> dict[str, Any]:
    """One model's ``ARCHIVE_KEYS`` from ``models=``, whole numbers, a key left out taking what
    TorchServe would serve (:func:`defaults_for`), and the ``worker_keys`` of its kind it sets;
    a PropertiesError names what is wrong."""
    settings = model_settings(dict(properties))
    if model not in settings:
        raise PropertiesError(f"config.properties has no models entry for {model!r}")
    entry = with_defaults(properties, settings[model])
    wrong = [
        key
        for key in ARCHIVE_KEYS
        if key in entry and (isinstance(entry[key], bool) or not isinstance(entry[key], int))
    ]
    if wrong:
        raise PropertiesError(f"models.{model}: {wrong} must be whole numbers")
    for key in worker_keys:
        problem = key.problem(entry[key.name]) if key.name in entry else None
        if problem:
            raise PropertiesError(f"models.{model}.{key.name}: {problem}")
    problem = queue_problem(entry)
    if problem:
        raise PropertiesError(f"models.{model}.{QUEUE_KEY}: {problem}")
    names = (*ARCHIVE_KEYS, *(k.name for k in worker_keys), QUEUE_KEY)
    return {key: entry[key] for key in names if key in entry}


def whole_number_problem(least: int) -> Callable[[Any], str | None]:
    """The check of a setting that must be a whole number of at least ``least``."""

    def problem(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"must be a whole number of at least {least}, got {value!r}"
        return None

    return problem


def queue_problem(entry: Mapping[str, Any]) -> str | None:
    """What is wrong with a model entry's jobQueueSize, or None (absent: nothing)."""
    return whole_number_problem(1)(entry[QUEUE_KEY]) if QUEUE_KEY in entry else None


def queue_size(properties: Mapping[str, str], entry: Mapping[str, Any]) -> int:
    """The most requests the model's queue holds: its entry's jobQueueSize, else job_queue_size."""
    if isinstance(entry.get(QUEUE_KEY), int):
        return int(entry[QUEUE_KEY])
    text = properties.get("job_queue_size", "").strip()
    return int(text) if text.isdigit() else DEFAULT_JOB_QUEUE_SIZE


# The deadline budget every kind's worker reads (batchkit.deadlines; 0: off), counted from the
# arrival stamp a proxy sets; each kind's own keys come after it (Kind.all_worker_keys).
DEADLINE_BUDGET = WorkerKey(
    "deadlineBudgetMs", "deadline_budget_ms", 0, whole_number_problem(0), "deadline budget"
)
SHARED_WORKER_KEYS = (DEADLINE_BUDGET,)


def format_models(document: dict[str, Any]) -> str:
    """The ``models=`` JSON laid out one setting per line, each continued with a backslash."""
    body = json.dumps(document, indent=4).splitlines()
    return "models=" + "\\\n".join(body) + "\n"


def replace_entry(text: str, key: str, new_lines: str) -> str:
    """Replace one logical entry (all its physical lines); other lines stay as they were."""
    lines = text.splitlines(keepends=True)
    for entry in parse_entries(text):
        if entry.key == key:
            return "".join(lines[: entry.first_line]) + new_lines + "".join(lines[entry.last_line + 1 :])
    suffix = "" if text.endswith("\n") or not text else "\n"
    return text + suffix + new_lines


def default_version(versions: Mapping[str, Any]) -> str:
    """The version whose settings TorchServe serves: the one marked ``defaultVersion``, else the first."""
    return next(
        (key for key, value in versions.items() if isinstance(value, dict) and value.get("defaultVersion")),
        next(iter(versions)),
    )


def with_model_settings(text: str, changes: Mapping[str, Mapping[str, Any]]) -> str:
    """The file's text with some models' default-version settings changed, every comment
    kept; a model without an entry gets one (version 1.0, ``<name>.mar``)."""
    properties = {entry.key: entry.value for entry in parse_entries(text)}
    document = json.loads(properties["models"]) if properties.get("models") else {}
    for name, settings in changes.items():
        versions = document.setdefault(name, {"1.0": {"defaultVersion": True, "marName": f"{name}.mar"}})
        versions[default_version(versions)].update(settings)
    return replace_entry(text, "models", format_models(document))


def update_model_settings(path: Path, model_name: str, changes: dict[str, Any]) -> None:
    """Change some settings of one model in ``models=``, keeping the file's comments."""
    path.write_text(with_model_settings(path.read_text(), {model_name: changes}))
