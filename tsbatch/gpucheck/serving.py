"""The serving half of ``scripts/gpu_check.sh``: every reduced precision through a real
TorchServe on the device, then a short Locust run, then one summary table.

On a GPU these are the paths no CPU test reaches (docs/precision-and-runtime.md lists
them): CUDA packages loaded by workers, fp16/bf16 served with ``TSBATCH_REQUIRE_CUDA=1``,
the ``gpu`` SLA profile. With ``--device cpu`` the same steps run on the CPU (the suite's
smoke test), so the script works the first time it meets a GPU.

    tsbatch gpu-check serve --device cuda --out reports/gpu-check
    tsbatch gpu-check summary --out reports/gpu-check
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from batchkit.candidates import ServingCandidate
from batchkit.precision import PRECISION_ENV, REQUIRE_CUDA_ENV
from batchkit.tolerance import probabilities_disagree
from tsbatch.archive import artifacts
from tsbatch.archive.compiled import host_targets
from tsbatch.archive.manifest import Manifest, load_manifest, workload_for
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe, start_instance
from tsbatch.server.served import served_decision, worker_rss_mb

RESULTS_FILE = "serving.json"
DECODE_RESULTS_FILE = "decoding.json"  # written by tsbatch.gpucheck.decoding
PHOTO_RESULTS_FILE = "photos.json"  # its photo sizes, measured first (--photos-only)


def batch_vs_alone(
    server: TorchServe, model: str, precision: str, manifest: Manifest, count: int = 8
) -> str | None:
    """Send ``count`` inputs alone, then all at once: why a batched answer differs from its
    alone answer beyond the precision's tolerance, or None. The inputs and the answer's
    ranking are the model's kind's (models.yaml)."""
    workload = workload_for(model, manifest)
    pool = workload.pool(11)[:count]
    alone = [server.client.predict(model, p.body, p.content_type, timeout=120) for p in pool]
    with ThreadPoolExecutor(max_workers=count) as executor:
        together = list(
            executor.map(lambda p: server.client.predict(model, p.body, p.content_type, timeout=120), pool)
        )
    for single, batched in zip(alone, together, strict=True):
        if single.status_code != 200 or batched.status_code != 200:
            return f"HTTP {single.status_code}/{batched.status_code}: {batched.text[:200]}"
        first, second = workload.distribution(single.json()), workload.distribution(batched.json())
        labels = sorted(set(first) & set(second))
        expected = torch.tensor([[first[label] for label in labels]])
        actual = torch.tensor([[second[label] for label in labels]])
        problem = probabilities_disagree(expected, actual, precision)
        if problem is None and next(iter(first)) != next(iter(second)):
            problem = "top-1 differs"
        if problem is not None:
            return problem
    return None


def serve_precision(
    precision: str, device: str, out: Path, model_store: Path, locust: tuple[str, int] | None
) -> list[dict[str, Any]]:
    """Start TorchServe with ``precision`` forced (and CUDA required on a GPU); one row per
    model of models.yaml."""
    manifest = load_manifest()
    models = list(manifest.models)
    os.environ[PRECISION_ENV] = precision
    if device == "cuda":
        os.environ[REQUIRE_CUDA_ENV] = "1"
    rows = []
    started = time.perf_counter()
    server = start_instance(out / f"serve-{precision}", model_store, models, timeout=300)
    try:
        start_s = time.perf_counter() - started
        for model in models:
            decision = served_decision(server, model)
            problem = batch_vs_alone(server, model, decision["precision"], manifest)
            rows.append(
                {
                    "step": f"serve {precision}",
                    "model": model,
                    "served": f"{decision['runtime']} {decision['precision']} {decision['file']} on {decision['device']}",
                    "ok": problem is None and decision["precision"] == precision,
                    "detail": problem
                    or f"cold load {decision['load_seconds']:.1f}s, server ready in {start_s:.0f}s",
                    "rss_mb": worker_rss_mb(server, model),
                }
            )
        if locust is not None:
            rows.append(locust_row(server, device, out, *locust))
    finally:
        server.stop()
        os.environ.pop(PRECISION_ENV, None)
        os.environ.pop(REQUIRE_CUDA_ENV, None)
    return rows


def locust_row(server: TorchServe, device: str, out: Path, run_time: str, users: int) -> dict[str, Any]:
    """A short headless Locust run gated on the device's SLA profile."""
    report = out / "locust-sla.json"
    command = [
        str(Path(sys.executable).parent / "locust"),
        "-f", str(REPO_ROOT / "loadtest" / "locustfile.py"),
        "-u", str(users), "-r", str(users), "-t", run_time, "--headless", "--only-summary",
        "--host", server.url("inference"),
        "--key-file", str(server.key_file),
        "--metrics-url", server.url("metrics"),
        "--management-url", server.url("management"),
        "--sla-profile", "gpu" if device == "cuda" else "cpu",
        "--sla-report", str(report),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    (out / "locust.log").write_text(result.stdout + result.stderr)
    return {
        "step": f"locust {run_time} ({'gpu' if device == 'cuda' else 'cpu'} SLA)",
        "model": "all",
        "served": "",
        "ok": result.returncode == 0,
        "detail": f"exit {result.returncode}; {report.name}"
        + ("" if result.returncode == 0 else "; see locust.log"),
        "rss_mb": [],
    }


def build_rows() -> list[dict[str, Any]]:
    """The build's gates, one row per candidate (the figures are in build_info.json)."""
    rows = []
    for name, spec in load_manifest().models.items():
        info_path = spec.artifact_dir / artifacts.BUILD_INFO_FILE
        if not info_path.exists():
            rows.append(
                {
                    "step": "build",
                    "model": name,
                    "served": "",
                    "ok": False,
                    "detail": "not built",
                    "rss_mb": [],
                }
            )
            continue
        for candidate, gate in artifacts.read_json(info_path).get("gates", {}).items():
            if "passed" not in gate:
                continue  # the fp32 reference: recorded, not judged
            figures = ", ".join(
                f"{key} {gate[key]:.4g}" for key in ("top1_agreement", "max_probability_diff") if key in gate
            )
            rows.append(
                {
                    "step": "build gate",
                    "model": name,
                    "served": candidate,
                    "ok": bool(gate["passed"]),
                    "detail": figures if gate["passed"] else "; ".join(gate.get("failures", [])),
                    "rss_mb": [],
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| step | model | what | ok | detail | worker RSS MiB |", "|---|---|---|---|---|---|"]
    for row in rows:
        rss = ", ".join(f"{size:.0f}" for size in row["rss_mb"])
        lines.append(
            f"| {row['step']} | {row['model']} | {row['served']} | {'PASS' if row['ok'] else 'FAIL'} | {row['detail']} | {rss} |"
        )
    return "\n".join(lines)


def default_precisions(device: str) -> str:
    """A GPU serves both reduced precisions; a CPU smoke run checks the one its build compiles
    (fp16 has no CPU serving path, so asking for it there could only fail)."""
    if device == "cuda":
        return "bf16,fp16"
    return ServingCandidate.parse(host_targets()[0]).precision


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve every model at each reduced precision on the device through a real "
        "TorchServe, then a short Locust run (serve), or print the GPU check's table (summary). "
        "scripts/gpu_check.sh runs both."
    )
    parser.add_argument("action", choices=["serve", "summary"])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--precisions",
        help="comma-separated (default: bf16,fp16 on cuda; on cpu, the precision this CPU serves)",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "reports" / "gpu-check")
    parser.add_argument(
        "--sweep-status", type=int, default=None, help="the sweep's exit status, for the summary"
    )
    parser.add_argument("--locust-time", default="20s", help="the Locust run after the first precision")
    parser.add_argument("--locust-users", type=int, default=16)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / RESULTS_FILE
    if args.action == "serve":
        rows = []
        for index, precision in enumerate((args.precisions or default_precisions(args.device)).split(",")):
            locust = (args.locust_time, args.locust_users) if index == 0 else None
            try:
                rows += serve_precision(precision, args.device, args.out, load_manifest().model_store, locust)
            except Exception as exc:  # one precision failing must not hide the others
                rows.append({"step": f"serve {precision}", "model": "all", "served": "", "ok": False,
                             "detail": f"{type(exc).__name__}: {str(exc)[:300]}", "rss_mb": []})  # fmt: skip
        results.write_text(json.dumps(rows, indent=2))
        return 0 if all(row["ok"] for row in rows) else 1
    rows = build_rows()
    if args.sweep_status is not None:
        sweep = {"step": "sweep", "model": "all", "served": "", "ok": args.sweep_status == 0,
                 "detail": f"exit {args.sweep_status}; summary.md", "rss_mb": []}  # fmt: skip
        rows.append(sweep)
    # served precisions, then the photo sizes and the decoding
    for steps in (results, args.out / PHOTO_RESULTS_FILE, args.out / DECODE_RESULTS_FILE):
        rows += json.loads(steps.read_text()) if steps.exists() else []
    text = table(rows)
    (args.out / "summary_table.md").write_text(text + "\n")
    print(text)
    return 0 if rows and all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
