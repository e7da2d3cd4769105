"""Benchmark our text classifier handler against the usual way of serving a BERT classifier.

Both run the same ``build/<model>/model.pt`` and tokenizer (``--model``, default: the
first text model of models.yaml) in a real TorchServe with
the same batch settings from config.properties; only the handler differs:

- ``ours``: ``handlers/text_classifier_handler.py`` (one tokenizer call per batch, padding to the
  longest item, length-sorted passes when lengths differ widely);
- ``usual``: ``tsbatch/bench/baseline_text_handler.py`` (each request tokenized alone
  and padded to 128 tokens);
- ``fp32-ts``: our handler pinned to fp32 TorchScript, the precision/runtime baseline
  (``ours`` serves what the archive chooses on this machine: a gated ``.pt2``, bf16 where
  the CPU has it);
- ``bf16`` and ``int8``: our handler pinned to bf16 (its package where gated) and to the
  int8 package, each where this machine can run it (else skipped, saying why).

Each is packaged as ``<model>.mar`` into its own temporary model store, then loaded by
a private server on free loopback ports, for each worker x thread setting asked for. The
toolkit's load client (``tsbatch.client.load``: a closed loop of 16 keep-alive connections
by default, one process) sends real utterances from the model's test split (else the
project's own utterances) and reports throughput
and nearest-rank latency percentiles. This is a benchmark, not a test: it prints numbers.

    tsbatch bench intent  # make bench-intent
    tsbatch bench intent --settings 2x1 --duration 30
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from batchkit.candidates import BASELINE, ServingCandidate
from batchkit.planner import Host, Reason
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import Manifest, ManifestError, ModelSpec, load_manifest
from tsbatch.archive.package import archive_settings, private_store
from tsbatch.archive.variants import default_variant, machine_variants, variant_spec
from tsbatch.bench.model_option import add_model_option, chosen_model
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.kinds.text.data import read_csv_examples
from tsbatch.kinds.text.schema import TextModel
from tsbatch.kinds.text.utterances import read_utterances
from tsbatch.paths import DEFAULT_MANIFEST, DEFAULT_PROPERTIES, REPO_ROOT, REPORTS_DIR
from tsbatch.server.process import start_instance
from tsbatch.server.served import worker_rss_mb
from tsbatch.settings.batch import BatchSettings

BASELINE_HANDLER = Path(__file__).with_name("baseline_text_handler.py")
REPORT_PATH = REPORTS_DIR / "bench_intent.json"
BASELINE_ROW = "fp32-ts"  # our handler pinned to fp32 TorchScript
# Rows pinned to a precision: each serves the planner's best candidate at it on this machine.
PINNED = {BASELINE_ROW: "fp32", "bf16": "bf16", "int8": "int8"}


@dataclass
class RunResult:
    handler: str
    workers: int
    threads: int
    clients: int
    seconds: float
    requests: int
    errors: int
    throughput_rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    worker_rss_mb: float = float("nan")  # the largest worker's, after the load


# ---- archives ------------------------------------------------------------------------
def archive_for(
    spec: ModelSpec,
    manifest: Manifest,
    handler: Path,
    directory: Path,
    properties: Path,
    settings: BatchSettings,
) -> tuple[Path, Path]:
    """A private config.properties and model store whose <model>.mar uses ``handler``."""
    model = spec.name
    variant = Manifest(
        models={model: spec.with_settings(handler=str(handler))},
        build_dir=manifest.build_dir,
        model_store=manifest.model_store,
    )
    changes = {model: settings.entry(("minWorkers", "maxWorkers", "torchThreads"))}
    with contextlib.redirect_stdout(io.StringIO()):  # packaging chatter
        return private_store(directory, [model], changes, source=properties, manifest=variant)


# ---- one run ---------------------------------------------------------------------------
def run_one(
    model: str,
    name: str,
    properties: Path,
    store: Path,
    run_dir: Path,
    settings: BatchSettings,
    texts: list[str],
    clients: int,
    warmup: float,
    duration: float,
) -> RunResult:
    server = start_instance(run_dir, store, [model], source=properties)
    try:
        driver = LoadDriver(
            f"{server.url('inference')}/predictions/{model}",
            [text.encode("utf-8") for text in texts],
            content_types="text/plain; charset=utf-8",
            headers=server.client.headers("inference"),
        )
        result = driver.run(LoadSpec(concurrency=clients, warmup_s=warmup, measure_s=duration))
        rss_mb = worker_rss_mb(server, model)  # after the load: what pods and nodes must hold
    finally:
        server.stop()
    figures = result.figures()

    def latency(q: float) -> float:
        value = result.latency_ms(q)
        return float("nan") if value is None else round(value, 1)

    return RunResult(
        handler=name,
        workers=settings.workers,
        threads=settings.torch_threads,
        clients=clients,
        seconds=duration,
        requests=figures.requests,
        errors=figures.failures,
        throughput_rps=round(figures.throughput_rps or 0.0, 1),
        p50_ms=latency(50),
        p90_ms=latency(90),
        p99_ms=latency(99),
        max_ms=latency(100),
        worker_rss_mb=max(rss_mb, default=float("nan")),
    )


def parse_setting(text: str) -> tuple[int, int]:
    workers, _, threads = text.lower().partition("x")
    return int(workers), int(threads or 1)


def print_table(results: list[RunResult]) -> None:
    print(
        f"\n{'handler':<8} {'workers':>7} {'threads':>7} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'errors':>7}"
        f" {'worker RSS MiB':>14}"
    )
    for r in results:
        print(
            f"{r.handler:<8} {r.workers:>7} {r.threads:>7} {r.throughput_rps:>8.1f} {r.p50_ms:>8.1f} "
            f"{r.p90_ms:>8.1f} {r.p99_ms:>8.1f} {r.errors:>7} {r.worker_rss_mb:>14.0f}"
        )


def runnable_rows(
    names: list[str], spec: ModelSpec, host: Host | None = None
) -> tuple[dict[str, ServingCandidate | None], dict[str, list[Reason]]]:
    """The asked-for rows this machine can run, each pinned row with its candidate (the
    baseline: fp32 TorchScript; others: the planner's first row at that precision), and
    the pinned rows it cannot, with the planner's reasons (``host``: this machine's)."""
    runnable, skipped = machine_variants(spec.artifact_dir, host=host)
    kept: dict[str, ServingCandidate | None] = {}
    missing: dict[str, list[Reason]] = {}
    for name in names:
        precision = PINNED.get(name)
        rows = [BASELINE] if precision == "fp32" else [row for row in runnable if row.precision == precision]
        if precision is None or rows:
            kept[name] = rows[0] if precision else None
        else:
            missing[name] = [reason for reason in skipped if reason.candidate.endswith(precision)] or [
                Reason("not-built", f"the archive has no {precision} candidate")
            ]
    return kept, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Serve the text classifier with our length-aware handler and with the usual "
        "pad-to-128 handler (same model, same batch settings) and print throughput and latency side by side."
    )
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--properties", type=Path, default=DEFAULT_PROPERTIES)
    parser.add_argument(
        "--settings", default="1x1,2x1,1x2", help="comma-separated WORKERSxTHREADS (default 1x1,2x1,1x2)"
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds first")
    parser.add_argument(
        "--handlers", default="ours,fp32-ts,int8,usual", help="which to run: ours,fp32-ts,bf16,int8,usual"
    )
    parser.add_argument("--report", type=Path, default=REPORT_PATH)
    add_model_option(parser, "text")
    args = parser.parse_args(argv)
    manifest = load_manifest(args.manifest)
    try:
        model = chosen_model(args.model, "text", manifest)
    except ManifestError as exc:
        parser.error(str(exc))
    spec = manifest.model(model)
    if not (spec.artifact_dir / artifacts.MODEL_FILE).exists():
        print(f"[bench] no exported model in {spec.artifact_dir}: run `make archive` first", file=sys.stderr)
        return 1
    data = spec.entry_as(TextModel).data
    test_split = data.test if data else None
    texts = (
        [text for text, _ in read_csv_examples(REPO_ROOT / test_split)] if test_split else read_utterances()
    )
    print(
        f"[bench] {model}: {len(texts)} {'test' if test_split else 'project'} utterances, {statistics.mean(len(t.split()) for t in texts):.1f} words on average; "
        f"{args.clients} clients, {args.warmup:.0f}s warm-up + {args.duration:.0f}s measured per run"
    )
    handlers = {"ours": spec.handler, **{name: spec.handler for name in PINNED}, "usual": BASELINE_HANDLER}
    chosen, missing = runnable_rows([name.strip() for name in args.handlers.split(",") if name.strip()], spec)
    for name, reasons in missing.items():
        print(f"[bench] {name} skipped: {'; '.join(map(str, reasons))}")
    results: list[RunResult] = []
    base_settings = archive_settings(args.properties, model)
    with tempfile.TemporaryDirectory(prefix="bench-intent-") as temp:
        for setting in args.settings.split(","):
            workers, threads = parse_setting(setting)
            settings = replace(base_settings.changed(workers=workers), torch_threads=threads)
            for name in chosen:
                root = Path(temp) / f"{name}-{workers}x{threads}"
                pinned = chosen[name]
                served = variant_spec(spec, Path(temp), pinned) if pinned else spec
                properties, store = archive_for(
                    served, manifest, handlers[name], root, args.properties, settings
                )
                print(
                    f"[bench] {name}: {workers} worker(s) x {threads} thread(s), batchSize {settings.batch_size}, "
                    f"maxBatchDelay {settings.max_batch_delay_ms} ms ...",
                    flush=True,
                )
                result = run_one(
                    model,
                    name,
                    properties,
                    store,
                    root / "run",
                    settings,
                    texts,
                    args.clients,
                    args.warmup,
                    args.duration,
                )
                print(
                    f"[bench]   {result.throughput_rps:.1f} req/s, p50 {result.p50_ms} ms, p99 {result.p99_ms} ms, {result.errors} errors",
                    flush=True,
                )
                results.append(result)
    print_table(results)
    print(f"ours serves {default_variant(spec.artifact_dir).label} on this machine")
    summary = summarize(results)
    for line in summary["lines"]:
        print(line)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps({"runs": [asdict(r) for r in results], **summary}, indent=2) + "\n")
    print(f"[bench] report: {args.report}")
    return 0


def summarize(results: list[RunResult]) -> dict[str, Any]:
    """Best setting per handler, and ours vs usual at each setting and at each one's best."""
    lines: list[str] = []
    best: dict[str, RunResult] = {}
    for result in results:
        if result.errors == 0 and (
            result.handler not in best or result.throughput_rps > best[result.handler].throughput_rps
        ):
            best[result.handler] = result
    for name, result in best.items():
        lines.append(
            f"best {name}: {result.throughput_rps:.1f} req/s (p50 {result.p50_ms} ms, p99 {result.p99_ms} ms) "
            f"with {result.workers} worker(s) x {result.threads} thread(s)"
        )
    ratios = {}
    if "ours" in best and "usual" in best and best["usual"].throughput_rps > 0:
        ratios["best_vs_best"] = round(best["ours"].throughput_rps / best["usual"].throughput_rps, 2)
        lines.append(f"ours / usual (each at its best setting): {ratios['best_vs_best']:.2f}x")
    by_setting = {(r.handler, r.workers, r.threads): r for r in results}
    for (name, workers, threads), result in by_setting.items():
        other = by_setting.get(("usual", workers, threads))
        if name == "ours" and other and other.throughput_rps > 0:
            ratio = round(result.throughput_rps / other.throughput_rps, 2)
            ratios[f"{workers}x{threads}"] = ratio
            lines.append(f"ours / usual at {workers}x{threads}: {ratio:.2f}x")
        baseline = by_setting.get((BASELINE_ROW, workers, threads))
        if name == "ours" and baseline and baseline.throughput_rps > 0:
            ratio = round(result.throughput_rps / baseline.throughput_rps, 2)
            ratios[f"vs_fp32_ts_{workers}x{threads}"] = ratio
            lines.append(f"speedup vs fp32 TorchScript served at {workers}x{threads}: {ratio:.2f}x")
    return {"best": {k: asdict(v) for k, v in best.items()}, "ratios": ratios, "lines": lines}
