"""The toolkit's load clients against NVIDIA's perf_analyzer: same server, model, request
and load, one after the other, with each client's own CPU.

Per model (each of models.yaml by default, one request from its kind's pool), at each
closed-loop concurrency and at one Poisson rate (open loop):

- ``perf_analyzer``: its default mode, the Open Inference Protocol's binary tensors on
  ``/v2/models/<m>/infer`` (through the frontend plugin's pass-on hop);
- ``raw v2``: the raw-socket client of the benches and the tuner (``tsbatch.client.load``)
  sending the same binary v2 request: only the client differs from perf_analyzer's row;
- ``raw``: the same client on ``/predictions/<m>``, the path the benches and tuner measure;
- ``locust``: ``tsbatch loadtest`` on ``/predictions/<m>``, the same body.

CPU is the client process's user+system seconds over its wall time (1.00 = one core): on a
host with few cores a busy client takes that CPU from the server it measures.

    tsbatch bench clients            # make bench-clients
    tsbatch bench clients --model bert_intent --concurrency 1 8 --rate 40 --seconds 5
"""

from __future__ import annotations

import argparse
import base64
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from batchkit.binary_tensors import ELEMENT_PREFIX
from batchkit.protocols import V2_OUTPUT_NAME
from tsbatch.archive.manifest import load_manifest
from tsbatch.client import perf_analyzer
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe, start_instance
from tsbatch.workloads.payloads import Payload

WARMUP_S = 2.0


@dataclass(frozen=True)
class Row:
    client: str
    requests: int
    failed: int
    throughput_rps: float
    p50_ms: float
    p99_ms: float
    cpu: float  # client CPU seconds per wall second


def one_input(payloads: list[Payload]) -> Payload:
    """The pool's first body that is one input as it is (not a JSON envelope)."""
    return next(p for p in payloads if not p.content_type.startswith("application/json"))


def v2_binary(input_name: str, body: bytes) -> tuple[bytes, int]:
    """One BYTES element in the binary extension, as perf_analyzer 2.40 sends it at batch
    size 1 (shape [1, 1], an empty id, the output asked for in binary): the request body
    and its JSON header's length."""
    tensor = ELEMENT_PREFIX.pack(len(body)) + body
    inputs = [
        {
            "name": input_name,
            "datatype": "BYTES",
            "shape": [1, 1],
            "parameters": {"binary_data_size": len(tensor)},
        }
    ]
    outputs = [{"name": V2_OUTPUT_NAME, "parameters": {"binary_data": True}}]
    header = json.dumps({"id": "", "inputs": inputs, "outputs": outputs}, separators=(",", ":")).encode()
    return header + tensor, len(header)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def raw_row(name: str, driver: LoadDriver, load: LoadSpec) -> Row:
    cpu, started = time.process_time(), time.perf_counter()
    result = driver.run(load)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - started
    figures = result.figures()
    return Row(
        name,
        figures.requests,
        figures.failures,
        figures.throughput_rps or 0.0,
        result.latency_ms(50) or 0.0,
        result.latency_ms(99) or 0.0,
        cpu / wall,
    )


def perf_row(server: TorchServe, model: str, input_name: str, body: bytes, load: LoadSpec) -> Row:
    address = server.url("inference").split("://", 1)[1]
    try:
        measured = perf_analyzer.run(
            address,
            model,
            body,
            input_name,
            server.token("inference"),
            concurrency=load.concurrency,
            rate_rps=load.rate_rps,
            window_s=load.measure_s / 3,
        )
    except perf_analyzer.PerfAnalyzerError as exc:
        print(f"[bench] perf_analyzer: {exc}")
        return Row("perf_analyzer (failed)", 0, 1, 0.0, 0.0, 0.0, 0.0)
    return Row(
        "perf_analyzer",
        measured.requests,
        0,  # it stops at the first failed request
        measured.throughput_rps,
        measured.p50_ms,
        measured.p99_ms,
        measured.cpu_s / measured.wall_s,
    )


def locust_row(server: TorchServe, model: str, payload: Payload, load: LoadSpec, work: Path) -> Row:
    requests = work / f"{model}.jsonl"
    line = {"base64": base64.b64encode(payload.body).decode(), "content_type": payload.content_type}
    requests.write_text(json.dumps(line) + "\n")
    report = work / f"{model}-sla.json"
    users = load.concurrency if not load.rate_rps else 4
    command = [sys.executable, "-m", "tsbatch", "loadtest", "--model", model, "--requests", str(requests)]
    command += ["-u", str(users), "-r", str(users), "-t", f"{WARMUP_S + load.measure_s:g}s"]
    command += ["--warmup", f"{WARMUP_S:g}", "--only-summary", "--no-deadlines", "--sla-report", str(report)]
    command += ["--host", server.url("inference"), "--key-file", str(server.key_file)]
    command += ["--metrics-url", server.url("metrics"), "--management-url", server.url("management")]
    if load.rate_rps:
        command += ["--mode", "open", "--user-rate", f"{load.rate_rps / users:g}"]
    cpu, started = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120 + load.measure_s
    )
    cpu, wall = _children_cpu_s() - cpu, time.perf_counter() - started
    if not report.exists():
        print(f"[bench] locust failed ({done.returncode}):\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
        return Row("locust (failed)", 0, 1, 0.0, 0.0, 0.0, 0.0)
    measured = json.loads(report.read_text())["models"][0]["measured"]
    return Row(
        "locust",
        measured["requests"],
        measured["failures"],
        measured["throughput_rps"] or 0.0,
        measured["p50_ms"] or 0.0,
        measured["p99_ms"] or 0.0,
        cpu / wall,
    )


def measure_model(server: TorchServe, model: str, load: LoadSpec, work: Path) -> list[Row]:
    kind = load_manifest().kind_of(model)
    payload = one_input(kind.workload.pool(0))
    input_name = kind.input_schema().single_key
    base, headers = server.url("inference"), server.client.headers("inference")
    body, header_length = v2_binary(input_name, payload.body)
    v2_headers = {**headers, "Inference-Header-Content-Length": str(header_length)}
    raw_load = LoadSpec(load.concurrency, load.rate_rps, WARMUP_S, load.measure_s)
    return [
        perf_row(server, model, input_name, payload.body, load),
        raw_row(
            "raw v2",
            LoadDriver(f"{base}/v2/models/{model}/infer", [body], headers=v2_headers, model=model),
            raw_load,
        ),
        raw_row(
            "raw",
            LoadDriver(
                f"{base}/predictions/{model}",
                [payload.body],
                content_types=payload.content_type,
                headers=headers,
            ),
            raw_load,
        ),
        locust_row(server, model, payload, load, work),
    ]


def print_table(model: str, load: LoadSpec, rows: list[Row]) -> None:
    print(f"\n{model}, {load.describe()}")
    print(
        f"  {'client':<22} {'requests':>8} {'failed':>6} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU':>5}"
    )
    for row in rows:
        print(
            f"  {row.client:<22} {row.requests:>8} {row.failed:>6} {row.throughput_rps:>8.1f} "
            f"{row.p50_ms:>7.1f} {row.p99_ms:>7.1f} {row.cpu:>5.2f}"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Run NVIDIA's perf_analyzer, the toolkit's raw-socket client and Locust one after the "
        "other against one server, with the same request and load, and print their figures and CPU side by side."
    )
    parser.add_argument("--model", action="append", help="a model to measure (repeat; default: every model)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[2, 8], help="closed-loop clients")
    parser.add_argument("--rate", type=float, default=40.0, help="open loop: Poisson arrivals per second")
    parser.add_argument(
        "--seconds", type=float, default=9.0, help="measured seconds per run (after a warm-up)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    manifest = load_manifest()
    models = args.model or list(manifest.models)
    if perf_analyzer.find_perf_analyzer() is None:
        print(f"[bench] perf_analyzer is not installed: {perf_analyzer.INSTALL_HINT}")
        return 1
    loads = [LoadSpec(c, None, WARMUP_S, args.seconds) for c in args.concurrency]
    loads.append(LoadSpec(1, args.rate, WARMUP_S, args.seconds))
    with tempfile.TemporaryDirectory(prefix="bench-clients-") as tmp:
        work = Path(tmp)
        print(f"[bench] starting TorchServe with {models} from {manifest.model_store} ...")
        server = start_instance(work / "run", manifest.model_store, models)
        try:
            for model in models:
                for load in loads:
                    print(f"[bench] {model}, {load.describe()} ...", flush=True)
                    print_table(model, load, measure_model(server, model, load, work))
        finally:
            server.stop()
    print(
        "\nOne after the other on one server; CPU = the client's CPU seconds per wall second. "
        "perf_analyzer and raw v2 send the same binary v2 request through the plugin's hop; "
        "raw and locust send the body to /predictions."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
