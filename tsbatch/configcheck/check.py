"""Check config.properties and the built archives, and explain every mistake found.

TorchServe accepts a lot silently: unknown keys are ignored, a typo in a model's JSON
settings falls back to defaults, and an archive's own model-config.yaml overrides the
batch settings written here. This checker says what is wrong, why it matters and what to
do. Exit status: 1 when there are errors (or warnings with --strict), else 0.
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import os
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from tsbatch.analysis.tune.queue import sized_queues
from tsbatch.archive.kind import installed_kinds
from tsbatch.archive.manifest import Manifest, ManifestError, add_manifest_arguments, load_manifest
from tsbatch.config.findings import Problem
from tsbatch.config.properties import (
    ADDRESS_KEYS,
    PropertiesError,
    load_models,
    model_settings,
    read_properties,
)
from tsbatch.configcheck.crosscheck import cross_check
from tsbatch.paths import DEFAULT_PROPERTIES, DEFAULT_SLA_FILE, TUNE_DIR
from tsbatch.settings.batch import (
    ARCHIVE_KEYS,
    BATCH_KEYS,
    QUEUE_KEY,
    SHARED_WORKER_KEYS,
    WorkerKey,
    defaults_for,
    queue_problem,
    with_defaults,
)

# Keys TorchServe 0.12's ConfigManager reads (anything else is silently ignored).
TORCHSERVE_KEYS = {
    "inference_address", "management_address", "metrics_address", "grpc_inference_address",
    "grpc_management_address", "grpc_inference_port", "grpc_management_port", "enable_grpc_ssl",
    "load_models", "model_store", "workflow_store", "models", "number_of_netty_threads",
    "netty_client_threads", "default_workers_per_model", "job_queue_size", "async_logging",
    "default_response_timeout", "default_startup_timeout", "unregister_model_timeout",
    "number_of_gpu", "cors_allowed_origin", "cors_allowed_methods", "cors_allowed_headers",
    "decode_input_request", "keystore", "keystore_pass", "keystore_type", "certificate_file",
    "private_key_file", "max_request_size", "max_response_size", "limit_max_image_pixels",
    "allowed_urls", "use_env_allowed_urls", "install_py_dep_per_model", "metrics_mode",
    "metrics_config", "metrics_format", "enable_metrics_api", "model_metrics_auto_detect",
    "disable_system_metrics", "system_metrics_cmd", "metric_time_interval", "enable_envvars_config",
    "ipex_enable", "ipex_gpu_enable", "cpu_launcher_enable", "cpu_launcher_args", "use_native_io",
    "io_ratio", "prefer_direct_buffer", "blacklist_env_vars", "service_envelope",
    "initial_worker_port", "initial_distribution_port", "disable_token_authorization",
    "token_expiration_min", "enable_model_api", "model_server_home", "vmargs", "plugins_path",
    "snapshot_store", "default_service_handler", "ts_header_key_sequence_id",
    "ts_header_key_sequence_start", "ts_header_key_sequence_end", "ts_open_inference_protocol",
    "cpp_log_config", "torchelastic_ts",
}  # fmt: skip
# Per-model keys of the models= JSON that TorchServe knows, plus the toolkit's own (and the
# kinds' own worker keys, ``worker_keys``).
MODEL_KEYS = {
    "defaultVersion", "marName", "minWorkers", "maxWorkers", "batchSize", "maxBatchDelay",
    "responseTimeout", "startupTimeout", "runtime", "deviceType", "parallelType", "parallelLevel",
    "continuousBatching", "useJobTicket", "useVenv", "stateful", "jobQueueSize",
    "maxRetryTimeoutInSec", "clientTimeoutInMills", "deviceIds", "torchThreads",
}  # fmt: skip
Keys = dict[str, WorkerKey]


def worker_keys(manifest: Manifest | None) -> Keys:
    """The models= keys the kinds' workers read: the manifest's kinds', else every installed kind's."""
    kinds = [spec.kind for spec in manifest.models.values()] if manifest else installed_kinds().values()
    return {key.name: key for kind in kinds for key in kind.all_worker_keys}


def _suggest(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


def check_properties(values: dict[str, str], base_dir: Path) -> list[Problem]:
    problems: list[Problem] = []
    for key in values:
        if key not in TORCHSERVE_KEYS:
            problems.append(
                Problem(
                    "warning",
                    key,
                    "TorchServe does not know this key and ignores it." + _suggest(key, TORCHSERVE_KEYS),
                )
            )
    for key in ADDRESS_KEYS.values():
        address = values.get(key)
        if address is None:
            continue
        host = urlparse(address).hostname or ""
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            scheme = urlparse(address).scheme
            problems.append(
                Problem(
                    "warning",
                    key,
                    f"binds {host}, reachable from other machines"
                    + (" over plain HTTP; use https or a TLS proxy" if scheme == "http" else "")
                    + ". Keep 127.0.0.1 unless a proxy or Kubernetes Service fronts it.",
                )
            )
    if values.get("disable_token_authorization", "false").strip().lower() == "true":
        problems.append(
            Problem(
                "warning",
                "disable_token_authorization",
                "token auth is off: anyone who reaches the ports can call every API.",
            )
        )
    if values.get("enable_model_api", "false").strip().lower() == "true":
        problems.append(
            Problem(
                "warning",
                "enable_model_api",
                "the model registration API is on: callers with the management key can load arbitrary archives (code) from URLs.",
            )
        )
    if values.get("metrics_mode", "log") != "prometheus":
        problems.append(
            Problem(
                "warning",
                "metrics_mode",
                "not 'prometheus': the /metrics endpoint will not serve TorchServe's or the handlers' metrics.",
            )
        )
    metrics_config = values.get("metrics_config")
    if metrics_config:
        path = Path(metrics_config)
        path = path if path.is_absolute() else base_dir / path
        if not path.exists():
            problems.append(
                Problem(
                    "error",
                    "metrics_config",
                    f"{path} does not exist; TorchServe will fail to load the handlers' metrics.",
                )
            )
    elif values.get("model_metrics_auto_detect", "false") != "true":
        problems.append(
            Problem(
                "warning",
                "metrics_config",
                "not set: the handlers' custom metrics (BatchSize, ...) are not declared and will be dropped.",
            )
        )
    if "job_queue_size" not in values:
        problems.append(
            Problem(
                "warning",
                "job_queue_size",
                "not set (default 100); set it so overload is answered with 503 early.",
            )
        )
    for key in ("job_queue_size", "max_request_size", "max_response_size", "default_response_timeout"):
        if key in values and not values[key].strip().isdigit():
            problems.append(Problem("error", key, f"must be a whole number, got {values[key]!r}"))
    store = values.get("model_store")
    if store:
        path = Path(store) if Path(store).is_absolute() else base_dir / store
        if not path.is_dir():
            problems.append(Problem("error", "model_store", f"{path} is not a directory"))
    return problems


def check_models(values: dict[str, str], keys: Keys) -> tuple[list[Problem], dict[str, dict[str, Any]]]:
    problems: list[Problem] = []
    try:
        settings = model_settings(values)
    except PropertiesError as exc:
        return [Problem("error", "models", str(exc))], {}
    total_threads, pools = 0, ["torchThreads", *(name for name, key in keys.items() if key.threads)]
    for name, entry in settings.items():
        where = f"models.{name}"
        for key in entry:
            if key not in MODEL_KEYS and key not in keys:
                problems.append(
                    Problem(
                        "error",
                        f"{where}.{key}",
                        "unknown setting; TorchServe ignores it and uses its default."
                        + _suggest(key, MODEL_KEYS | set(keys)),
                    )
                )
        for default in defaults_for(values, entry):
            problems.append(Problem("note", f"{where}.{default.key}", f"left out: {default.taken()}."))
        for key in (key for key in ARCHIVE_KEYS if key in entry):
            if isinstance(entry[key], bool) or not isinstance(entry[key], int):
                problems.append(
                    Problem("error", f"{where}.{key}", f"must be a whole number, got {entry[key]!r}")
                )
        ints = {k: v for k, v in entry.items() if isinstance(v, int) and not isinstance(v, bool)}
        if ints.get("batchSize", 1) < 1:
            problems.append(Problem("error", f"{where}.batchSize", "must be at least 1."))
        if ints.get("maxBatchDelay", 0) < 0:
            problems.append(Problem("error", f"{where}.maxBatchDelay", "must be 0 or more (milliseconds)."))
        if ints.get("batchSize", 1) > 1 and ints.get("maxBatchDelay", 1) == 0:
            problems.append(
                Problem(
                    "warning",
                    f"{where}.maxBatchDelay",
                    "is 0 with batchSize > 1: the frontend will not wait, so batches rarely form.",
                )
            )
        if ints.get("maxBatchDelay", 0) > 1000:
            problems.append(
                Problem(
                    "warning",
                    f"{where}.maxBatchDelay",
                    f"{ints['maxBatchDelay']} ms adds up to that much latency to every lone request.",
                )
            )
        if "minWorkers" in ints and "maxWorkers" in ints and ints["minWorkers"] > ints["maxWorkers"]:
            problems.append(
                Problem(
                    "error",
                    f"{where}.minWorkers",
                    f"{ints['minWorkers']} is more than maxWorkers {ints['maxWorkers']}.",
                )
            )
        if ints.get("minWorkers", 1) < 1:
            problems.append(
                Problem(
                    "warning",
                    f"{where}.minWorkers",
                    "is 0: the model starts with no worker and requests fail until one is scaled up.",
                )
            )
        if ints.get("responseTimeout", 1) < 1:
            problems.append(Problem("error", f"{where}.responseTimeout", "must be at least 1 second."))
        if ints.get("torchThreads", 1) < 1:
            problems.append(Problem("error", f"{where}.torchThreads", "must be at least 1."))
        for name, why in ((name, keys[name].problem(entry[name])) for name in keys if name in entry):
            if why:
                problems.append(Problem("error", f"{where}.{name}", why + "."))
        queue = queue_problem(entry)
        if queue:
            problems.append(Problem("error", f"{where}.{QUEUE_KEY}", queue + "."))
        # A worker decodes, then runs the model: its busiest moment takes the larger pool (auto: 1).
        busiest = max(ints.get(name, 1) for name in pools)
        total_threads += ints.get("maxWorkers", 1) * busiest
    cores = os.cpu_count() or 1
    if total_threads > cores:
        problems.append(
            Problem(
                "warning",
                "models",
                f"workers x max({', '.join(pools)}) add up to {total_threads} CPU threads "
                f"on {cores} cores (an auto pool counts as 1: it decodes big pictures on the cores the model "
                "leaves idle); CPU-bound workers will slow each other down (fine when models "
                f"run on GPUs, where {', '.join(pools[1:]) or 'each pool'} is sized by "
                "docs/precision-and-runtime.md).",
            )
        )
    for model in load_models(values) or []:
        if model not in settings:
            problems.append(
                Problem(
                    "warning",
                    "load_models",
                    f"{model} has no entry in models=, so it runs with TorchServe's defaults (batch size 1).",
                )
            )
    return problems, settings


def archive_model_config(mar_path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(mar_path) as archive:
        names = [n for n in archive.namelist() if n.endswith("model-config.yaml")]
        if not names:
            return {}
        return yaml.safe_load(archive.read(names[0])) or {}


def check_archives(settings: dict[str, dict[str, Any]], model_store: Path, keys: Keys) -> list[Problem]:
    problems: list[Problem] = []
    for name, entry in settings.items():
        mar = model_store / entry.get("marName", f"{name}.mar")
        if not mar.exists():
            problems.append(
                Problem("error", f"archive {mar.name}", f"not built; run `make archive` (expected {mar}).")
            )
            continue
        baked = archive_model_config(mar)
        handler = baked.get("handler") or {}
        # The worker keys its worker reads (every worker's, and its kind's), defaults included:
        # an archive built before a shared key existed runs at that key's default.
        shared = {key.name for key in SHARED_WORKER_KEYS}
        read = {
            k: entry.get(k, key.default) for k, key in keys.items() if key.field in handler or k in shared
        }
        expected = {
            **{k: entry.get(k) for k in (*BATCH_KEYS, QUEUE_KEY)},
            "torchThreads": entry.get("torchThreads"),
            **read,
        }
        found = {
            **{k: baked.get(k) for k in (*BATCH_KEYS, QUEUE_KEY)},
            "torchThreads": handler.get("torch_threads"),
            **{k: handler.get(keys[k].field, keys[k].default) for k in read},
        }
        differing = [k for k in expected if expected[k] != found[k]]
        if differing:
            detail = ", ".join(
                f"{k}: archive {found[k]} vs config.properties {expected[k]}" for k in differing
            )
            problems.append(
                Problem(
                    "error",
                    f"archive {mar.name}",
                    f"disagrees with config.properties ({detail}). TorchServe would use the archive's values; "
                    "run `make archive` (or `make serve`) to repackage.",
                )
            )
    return problems


def check(
    properties_path: Path = DEFAULT_PROPERTIES,
    manifest: Manifest | None = None,
    include_archives: bool = True,
    tune_dir: Path | None = None,
    sla_file: Path = DEFAULT_SLA_FILE,
) -> list[Problem]:
    """Every finding; with ``tune_dir`` (the tuner's reports) the job queues are sized too."""
    values, keys = read_properties(properties_path), worker_keys(manifest)
    problems = check_properties(values, properties_path.resolve().parent)
    model_problems, settings = check_models(values, keys)
    problems += model_problems
    if tune_dir is not None:
        problems += sized_queues(values, settings, tune_dir, sla_file)
    store = (
        manifest.model_store
        if manifest
        else properties_path.resolve().parent / values.get("model_store", "model-store")
    )
    if manifest is not None:
        problems += cross_check(values, settings, manifest, store)
    if include_archives and settings:
        loaded = load_models(values)
        if loaded:
            settings = {name: entry for name, entry in settings.items() if name in loaded}
        served = {name: with_defaults(values, entry) for name, entry in settings.items()}
        problems += check_archives(served, store, keys)
    return problems


def check_files(
    properties_path: Path, manifest_path: Path, include_archives: bool = True, tune_dir: Path | None = None
) -> list[Problem]:
    """:func:`check` of both files as ``make check-config`` reads them: a manifest the build
    would refuse is an error of its own, and config.properties is then checked alone."""
    try:
        manifest: Manifest | None = load_manifest(manifest_path)
        problems = []
    except ManifestError as exc:
        manifest, problems = None, [Problem("error", "manifest", str(exc))]
    return problems + check(properties_path, manifest, include_archives, tune_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check config.properties, models.yaml and the built archives, and say what is wrong "
        "and what to change. Exits 1 on errors (and on warnings with --strict)."
    )
    add_manifest_arguments(parser, choose_models=False)
    parser.add_argument("--no-archives", action="store_true", help="check the file only")
    parser.add_argument("--strict", action="store_true", help="warnings fail too")
    parser.add_argument(
        "--tune-reports",
        type=Path,
        default=TUNE_DIR,
        help="the tuner's reports, whose measured throughput sizes each job queue to its SLA (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    problems = check_files(args.properties, args.manifest, not args.no_archives, args.tune_reports)
    for problem in problems:
        print(problem)
    errors = [p for p in problems if p.severity == "error"]
    warnings = [p for p in problems if p.severity == "warning"]
    print(f"{args.properties}: {len(errors)} error(s), {len(warnings)} warning(s)")
    return 1 if errors or (args.strict and warnings) else 0
