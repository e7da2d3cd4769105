"""Read and edit TorchServe's ``config.properties`` (Java properties) without losing comments.

TorchServe reads the file with ``java.util.Properties``; this module follows the same
rules for what we need: ``#``/``!`` comments, ``key=value`` / ``key: value`` /
``key value``, and backslash line continuations (used by the multi-line ``models=`` JSON).
Edits replace one logical entry in place and keep every other line byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsbatch.settings.batch import BatchSettings, SettingsError, WorkerKey

# TorchServe's three APIs and the keys that hold their addresses.
ADDRESS_KEYS = {
    "inference": "inference_address",
    "management": "management_address",
    "metrics": "metrics_address",
}


class PropertiesError(SettingsError):
    """config.properties cannot be understood; the message says where and why."""


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


def model_settings(properties: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per-model entries of the ``models=`` JSON as the file spells them: ``{name: {batchSize: ..., ...}}``
    (for the checks of the file and its edits; the settings served are :func:`configured_settings`).

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


def configured_settings(
    properties: Mapping[str, str], model: str, worker_keys: Sequence[WorkerKey] = ()
) -> BatchSettings:
    """One model's settings in ``models=`` (:meth:`BatchSettings.configured`: a key left out
    takes what TorchServe would serve); a SettingsError names what is wrong."""
    settings = model_settings(properties)
    if model not in settings:
        raise PropertiesError(f"config.properties has no models entry for {model!r}")
    return BatchSettings.configured(properties, model, settings[model], worker_keys)


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
