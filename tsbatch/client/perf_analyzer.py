"""NVIDIA's perf_analyzer, run in its default mode (the Open Inference Protocol over HTTP)
against a TorchServe that the frontend plugin lets it read (``/v2/models/<m>/config``).

The binary is not a Python dependency: ``make perf-analyzer`` (scripts/ensure_perf_analyzer.sh)
unpacks it from the tritonclient 2.40.0 wheel into ``build/perf_analyzer/``. This module finds
it, writes the ``--input-data`` file for one request, runs one measurement and reads its CSV.
"""

from __future__ import annotations

import base64
import csv
import json
import re
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from batchkit.binary_tensors import ELEMENT_PREFIX
from tsbatch.paths import REPO_ROOT

INSTALLED = REPO_ROOT / "build" / "perf_analyzer" / "perf_analyzer"
INSTALL_HINT = "run `make perf-analyzer` (scripts/ensure_perf_analyzer.sh)"


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer is missing, or its run failed (it stops at the first failed request)."""


def find_perf_analyzer() -> Path | None:
    """``build/perf_analyzer/perf_analyzer`` (the wrapper that finds libcudart), else one on PATH."""
    if INSTALLED.exists():
        return INSTALLED
    found = shutil.which("perf_analyzer")
    return Path(found) if found else None


def input_data(input_name: str, body: bytes) -> dict[str, object]:
    """perf_analyzer's ``--input-data`` JSON for one BYTES input holding ``body``.

    perf_analyzer puts a ``b64`` value's bytes into the tensor as they are, so for a BYTES
    tensor they must be its serialized form: each element's 4-byte little-endian length,
    then its bytes. Raw image bytes in ``b64`` are refused by the server with that hint."""
    serialized = ELEMENT_PREFIX.pack(len(body)) + body
    return {"data": [{input_name: {"b64": base64.b64encode(serialized).decode()}}]}


@dataclass(frozen=True)
class PerfResult:
    """One perf_analyzer measurement: its own figures, and the CPU its process used."""

    requests: int
    throughput_rps: float
    p50_ms: float
    p99_ms: float
    cpu_s: float
    wall_s: float


def _child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(
    address: str,
    model: str,
    body: bytes,
    input_name: str,
    token: str | None,
    *,
    concurrency: int = 1,
    rate_rps: float | None = None,
    window_s: float = 3.0,
    binary: Path | None = None,
) -> PerfResult:
    """perf_analyzer against ``address`` (host:port of the inference API), closed loop at
    ``concurrency`` or Poisson arrivals at ``rate_rps``; every request is ``body``.

    perf_analyzer measures windows of ``window_s`` until three in a row are stable; the
    stability threshold is set wide (100%) so a run takes about three windows."""
    executable = binary or find_perf_analyzer()
    if executable is None:
        raise PerfAnalyzerError(f"perf_analyzer is not installed: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="perf-analyzer-") as workdir:
        data, report = Path(workdir) / "input.json", Path(workdir) / "report.csv"
        data.write_text(json.dumps(input_data(input_name, body)))
        command = [str(executable), "-m", model, "-u", address, "--input-data", str(data)]
        command += ["-p", str(int(window_s * 1000)), "-s", "100", "-f", str(report)]
        if token:
            command += ["-H", f"Authorization: Bearer {token}"]
        if rate_rps:
            command += ["--request-rate-range", f"{rate_rps:g}", "--request-distribution", "poisson"]
        else:
            command += ["--concurrency-range", str(concurrency)]
        cpu_before, started = _child_cpu_s(), time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=60 + 20 * window_s)
        wall, cpu = time.perf_counter() - started, _child_cpu_s() - cpu_before
        if done.returncode != 0 or not report.exists():
            raise PerfAnalyzerError(
                f"perf_analyzer failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        row = next(csv.DictReader(report.open()))
    count = re.search(r"Request count: (\d+)", done.stdout)
    return PerfResult(
        requests=int(count.group(1)) if count else 0,
        throughput_rps=float(row["Inferences/Second"]),
        p50_ms=float(row["p50 latency"]) / 1000,
        p99_ms=float(row["p99 latency"]) / 1000,
        cpu_s=cpu,
        wall_s=wall,
    )
