"""Start, stop and inspect the TorchServe that ``make serve`` runs in the background.

``start`` rebuilds what is stale (archives repackage in seconds when config.properties
changed), refuses a config with errors, restarts a running instance so new settings
apply, waits until every model is READY and prints the endpoints and how to get a token.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tsbatch.archive.manifest import Manifest, load_manifest, workload_for
from tsbatch.archive.package import package
from tsbatch.archive.plugins import PluginBuildError, build_all
from tsbatch.config.properties import ADDRESS_KEYS, load_models, model_settings, read_properties
from tsbatch.configcheck.check import check
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.process import ServerError, TorchServe, start_instance
from tsbatch.server.process_group import read_pid, stop_process_group
from tsbatch.server.served import serving_summary
from tsbatch.settings.batch import BatchSettings


def is_running(run_dir: Path) -> bool:
    pid = read_pid(run_dir / "launcher.pid")
    if pid is None:
        return False
    try:
        import os

        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(run_dir: Path) -> bool:
    pid = read_pid(run_dir / "launcher.pid")
    if pid is None:
        return False
    stop_process_group(pid)
    (run_dir / "launcher.pid").unlink(missing_ok=True)
    (run_dir / "key_file.json").unlink(missing_ok=True)
    return True


def start(run_dir: Path, properties: Path, timeout: float, manifest: Manifest | None = None) -> int:
    manifest = manifest or load_manifest()
    listed = load_models(read_properties(properties))
    models = list(manifest.models) if listed is None else listed
    if not models:
        print(f"{properties}: load_models names no model; list the archives to serve (resnet18.mar,...)")
        return 2
    for model in models:  # seconds when only config.properties changed; no re-export
        package(manifest.model(model), manifest, properties)
    try:
        build_all()  # the frontend plugins plugins_path names (a no-op when up to date)
    except PluginBuildError as exc:
        print(f"[serve] {exc}")
        return 1
    problems = check(properties, manifest, include_archives=True)
    for problem in problems:
        print(problem)
    if any(problem.severity == "error" for problem in problems):
        print("[serve] config.properties has errors (above); not starting")
        return 1
    if is_running(run_dir):
        print("[serve] restarting the running TorchServe so the current settings apply")
        stop(run_dir)
    try:
        server = start_instance(
            run_dir.resolve(),
            manifest.model_store,
            models,
            source=properties,
            private_ports=False,
            timeout=timeout,
        )
    except ServerError as exc:  # a worker that cannot load, or a frontend that exited: say why
        print(f"[serve] FAILED: {exc}", file=sys.stderr)
        return 1
    print_endpoints(server, models, run_dir, manifest)
    return 0


def example_commands(inference_url: str, key_file: Path, models: list[str], manifest: Manifest) -> list[str]:
    """Commands that call each served model, to paste from the repository root: each
    model's kind says how (its workload's ``example``)."""
    commands = [
        f'TOKEN=$(python3 -c \'import json; print(json.load(open("{key_file}"))["inference"]["key"])\')'
    ]
    for model in models:
        for line in workload_for(model, manifest).example(f"{inference_url}/predictions/{model}"):
            if line not in commands:  # one digit.png for every image model
                commands.append(line)
    return commands


def print_endpoints(server: TorchServe, models: list[str], run_dir: Path, manifest: Manifest) -> None:
    entries = model_settings(server.properties)
    print(f"\nTorchServe is running (logs: {run_dir}/logs).")
    for kind in ADDRESS_KEYS:
        print(f"  {kind:<10} {server.url(kind)}")
    for model in models:
        settings = BatchSettings.configured(server.properties, model, entries.get(model, {}))
        print(
            f"  model {model}: POST {server.url('inference')}/predictions/{model} "
            f"(batchSize={settings.batch_size}, maxBatchDelay={settings.max_batch_delay_ms} ms)"
        )
    print("\nWhat the workers serve (their own decision):")
    for line in serving_summary(server, models):
        print(line)
    key_file = (run_dir / "key_file.json").resolve()
    print(f"\nToken auth is on. Keys are in {key_file}. Try, from {REPO_ROOT}:")
    for command in example_commands(server.url("inference"), key_file, models, manifest):
        print(f"  {command}")
    print(f"  (the management API at {server.url('management')} takes the 'management' key)")
    print("Stop with: make stop")


def status(run_dir: Path) -> int:
    if not is_running(run_dir):
        print("[serve] not running")
        return 1
    server = TorchServe.from_run_dir(run_dir)
    models = list(model_settings(server.properties))
    for model in models:
        try:
            print(json.dumps(server.client.describe(model), indent=2))
        except Exception as exc:
            print(f"{model}: {exc}")
    print("What the workers serve (their own decision):")
    try:
        print("\n".join(serving_summary(server, models)))
    except Exception as exc:  # a model still loading answers the describe call later
        print(f"  not available yet: {exc}")
    return 0


ACTION_HELP = {
    "start": "Build what is missing or stale, start TorchServe in the background and wait until every "
    "model is READY; then print the endpoints and a command that calls each model.",
    "stop": "Stop the TorchServe that `tsbatch serve` started.",
    "status": "Show the models of the running server, their batch settings and what each worker serves.",
}


def main(argv: list[str] | None = None, action: str = "start") -> int:
    """``tsbatch serve``, ``stop`` and ``status``: one parser, the action named by the command."""
    parser = argparse.ArgumentParser(description=ACTION_HELP[action])
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=REPO_ROOT / ".serve",
        help="the server's logs and key file (default .serve)",
    )
    parser.add_argument("--properties", type=Path, default=DEFAULT_PROPERTIES, help="the TorchServe config")
    parser.add_argument(
        "--timeout", type=float, default=240, help="seconds to wait for every model to be READY (default 240)"
    )
    args = parser.parse_args(argv)
    if action == "start":
        return start(args.run_dir, args.properties, args.timeout)
    if action == "stop":
        print("[serve] stopped" if stop(args.run_dir) else "[serve] was not running")
        return 0
    return status(args.run_dir)
