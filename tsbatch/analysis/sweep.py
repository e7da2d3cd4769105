"""In-process batch-size sweep of the exported TorchScript models (``make sweep``).

For each model, input scenario and precision it times batches of 1, 2, 4, ... up to a
limit after warm-up, and records latency per batch (mean, p50, p95), throughput in
samples/s, peak memory (CUDA max allocated on a GPU, process RSS on the CPU) and how far
each sample's output drifts from running it alone at batch size 1 (max |diff|, cosine
similarity, top-1 agreement). An out-of-memory error ends that curve and is reported.

Inputs are the real ones: ResNet images go through the handler's own preprocessing at the
archive's input size; the intent model sees our utterances (padded to the longest of each
batch, as the handler pads) and a fixed long length. fp32 always runs; fp16 and bf16
autocast run on a GPU (bf16 on the CPU with ``--cpu-bf16``).

Writes ``sweep.csv``, one ``<model>_<precision>.png`` per model and precision, and
``summary.md`` naming the knee (smallest batch reaching 90% of peak throughput) and the
largest batch whose p95 stays within the latency budget.

    python -m scripts.sweep                                  # every built model, CPU here
    python -m scripts.sweep --target resnet18 --max-batch 8 --iters 5
    python -m scripts.sweep --target resnet18-imagenet --device cuda   # see scripts/gpu_check.sh
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil
import torch

from batchkit.config import ImageModelConfig
from batchkit.runtime import load_torchscript, optimized_or_plain
from tsbatch.analysis.selection import (
    KNEE_FRACTION,
    knee_batch_size,
    largest_within_budget,
    power_of_two_batch_sizes,
)
from tsbatch.build import artifacts
from tsbatch.build.manifest import load_manifest
from tsbatch.paths import REPO_ROOT
from tsbatch.sla.percentile import percentile
from tsbatch.sla.profiles import SlaError, load_sla

DEFAULT_OUT = REPO_ROOT / "reports" / "sweep"
PRECISIONS = ("fp32", "fp16", "bf16")
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
POOL_SIZE = 256  # distinct samples per scenario; larger batches cycle through them
ROTATIONS = 8  # distinct batches per point, timed in turn (the length mix of text varies)
IMAGENET_TARGET = "resnet18-imagenet"
INTENT_BASE_TARGET = "bert_intent-base"

Inputs = tuple[torch.Tensor, ...]


# ---------------------------------------------------------------- what is swept
@dataclass
class Scenario:
    """One input distribution: a batch of ``b`` samples from ``offset`` on (cycling through
    the pool), or sample ``i`` alone."""

    name: str
    batch: Callable[[int, int], Inputs]
    single: Callable[[int], Inputs]


@dataclass
class Target:
    """A model to sweep: the module, what it is (for the report) and its input scenarios."""

    name: str  # the row label, e.g. "resnet18" or "resnet18-imagenet"
    sla_model: str  # the model whose SLA gives the default latency budget
    description: str
    module: torch.nn.Module
    scenarios: list[Scenario]
    # fp32 rows run the module frozen and optimized, as the workers run it; autocast rows
    # (what-if precisions the handlers do not serve) run the plain module.
    optimize: bool = False


@dataclass
class SweepRow:
    """One (model, scenario, precision, batch size) measurement: a line of sweep.csv."""

    model: str
    scenario: str
    precision: str
    device: str
    batch_size: int
    status: str  # ok | oom | error
    iterations: int = 0
    latency_mean_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    throughput_sps: float | None = None
    peak_mem_mb: float | None = None
    mem_kind: str = ""
    max_abs_diff: float | None = None  # against the same sample alone at batch 1, same precision
    cosine_min: float | None = None
    top1_agreement: float | None = None
    fp32_max_abs_diff: float | None = None  # against the same sample alone at batch 1 in fp32
    fp32_top1_agreement: float | None = None
    output_dtype: str = ""
    note: str = ""


CSV_FIELDS = [f.name for f in fields(SweepRow)]


@dataclass
class SweepResult:
    rows: list[SweepRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # precisions skipped, targets missing


def cycle(items: Sequence[Any], count: int, offset: int = 0) -> list[Any]:
    return [items[(offset + i) % len(items)] for i in range(count)]


# ---- images -----------------------------------------------------------------------
def digit_images(count: int, size: int = 64, seed: int = 0) -> list[Any]:
    """Real handwritten digits (scikit-learn's bundled set) as RGB PIL images of ``size`` px;
    drawn digits where scikit-learn is not installed (a bare GPU machine)."""
    from PIL import Image

    try:
        from sklearn.datasets import load_digits
    except ImportError:
        return drawn_digits(count, size, seed)
    digits = load_digits()
    order = random.Random(seed).sample(range(len(digits.images)), count)
    images = []
    for index in order:
        pixels = (digits.images[index] * (255.0 / 16.0)).clip(0, 255).astype("uint8")
        images.append(Image.fromarray(pixels, mode="L").resize((size, size), Image.BILINEAR).convert("RGB"))
    return images


def drawn_digits(count: int, size: int, seed: int) -> list[Any]:
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    images = []
    for _ in range(count):
        image = Image.new("L", (size, size), rng.randint(0, 40))
        font = ImageFont.load_default(size=int(size * rng.uniform(0.6, 0.85)))
        ImageDraw.Draw(image).text(
            (size / 2, size / 2), str(rng.randint(0, 9)), fill=rng.randint(200, 255), font=font, anchor="mm"
        )
        images.append(image.rotate(rng.uniform(-12, 12)).convert("RGB"))
    return images


def image_scenario(handler: dict[str, Any], pool_size: int = POOL_SIZE) -> Scenario:
    """Digit images preprocessed exactly as the handler does, at the archive's crop size."""
    from batchkit.images import preprocess

    resize, crop = int(handler["resize_size"]), int(handler["crop_size"])
    tensors = [
        preprocess(image, resize, crop, handler["mean"], handler["std"])
        for image in digit_images(pool_size, size=max(64, resize))
    ]
    return Scenario(
        name=f"{crop}x{crop}",
        batch=lambda b, offset=0: (torch.stack(cycle(tensors, b, offset)),),
        single=lambda i: (tensors[i % len(tensors)].unsqueeze(0),),
    )


def archive_image_target(name: str, artifact_dir: Path) -> Target:
    handler = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    optimize = bool(handler.get("optimize", ImageModelConfig.optimize))
    module = load_torchscript(
        artifact_dir / handler.get("model_file", artifacts.MODEL_FILE), torch.device("cpu")
    )
    weights = handler.get("weights", "weights not recorded") + (
        ", fp32 frozen + optimized" if optimize else ""
    )
    return Target(
        name=name,
        sla_model=name,
        description=f"{artifact_dir.relative_to(REPO_ROOT) if artifact_dir.is_relative_to(REPO_ROOT) else artifact_dir}"
        f"/model.pt ({handler.get('architecture', 'image model')}, {weights})",
        module=module.eval(),
        scenarios=[image_scenario(handler)],
        optimize=optimize,
    )


def imagenet_resnet_target() -> Target:
    """ImageNet-shaped resnet18 with RANDOM weights at 224x224 and the production
    preprocessing (resize 256, crop 224, ImageNet mean/std): right for timing, useless
    for predictions. Needs no download."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=1000).eval()
    reference = torchvision.models.ResNet18_Weights.DEFAULT.transforms()
    handler = {
        "resize_size": int(reference.resize_size[0]),
        "crop_size": int(reference.crop_size[0]),
        "mean": list(reference.mean),
        "std": list(reference.std),
    }
    return Target(
        name=IMAGENET_TARGET,
        sla_model="resnet18",
        description="torchvision resnet18, ImageNet shape (1000 classes), RANDOM weights - timing only; "
        "TorchScript via torch.jit.script, fp32 frozen + optimized as workers run it; 224x224 with "
        "the production preprocessing",
        module=torch.jit.script(model),
        scenarios=[image_scenario(handler)],
        optimize=True,
    )


# ---- text -------------------------------------------------------------------------
def utterances(seed: int = 0) -> list[str]:
    """Our intent utterances: the test split, else every raw CSV."""
    intents = REPO_ROOT / "data" / "intents"
    paths = (
        [intents / "test.csv"] if (intents / "test.csv").exists() else sorted((intents / "raw").glob("*.csv"))
    )
    texts: list[str] = []
    for path in paths:
        with path.open(newline="") as handle:
            texts.extend(row["text"] for row in csv.DictReader(handle) if row.get("text", "").strip())
    if not texts:
        raise FileNotFoundError(f"no utterances under {intents}")
    random.Random(seed).shuffle(texts)
    return texts


def text_scenarios(tokenizer_dir: Path, max_length: int, pool_size: int = POOL_SIZE) -> list[Scenario]:
    """Our utterances padded to the longest of each batch, and all samples at ``max_length``."""
    from batchkit.text import load_tokenizer, pad_id, pad_to_longest, tokenize

    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    padding = pad_id(tokenizer)
    texts = utterances()
    ids = tokenize(tokenizer, texts[:pool_size]).ids
    # Long inputs: several utterances joined and truncated, so every sample is max_length real tokens.
    joined = [" ".join(cycle(texts[i:] + texts[:i], 12)) for i in range(pool_size)]
    long_ids = tokenize(tokenizer, joined).ids

    def scenario(name: str, pool: list[list[int]]) -> Scenario:
        return Scenario(
            name=name,
            batch=lambda b, offset=0: pad_to_longest(cycle(pool, b, offset), padding),
            single=lambda i: pad_to_longest([pool[i % len(pool)]], padding),
        )

    lengths = sorted(len(row) for row in ids)
    return [
        scenario(f"utterances (median {lengths[len(lengths) // 2]} tok)", ids),
        scenario(f"fixed {max(len(row) for row in long_ids)} tok", long_ids),
    ]


def archive_text_target(name: str, artifact_dir: Path) -> Target:
    handler = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    tokenizer_dir = artifact_dir / handler.get("tokenizer_dir", "tokenizer")
    module = torch.jit.load(
        str(artifact_dir / handler.get("model_file", artifacts.MODEL_FILE)), map_location="cpu"
    )
    return Target(
        name=name,
        sla_model=name,
        description=f"build/{name}/model.pt ({handler.get('base_model', 'text model')}, max_length {handler['max_length']})",
        module=module.eval(),
        scenarios=text_scenarios(tokenizer_dir, int(handler["max_length"])),
    )


def intent_base_target(work_dir: Path) -> Target:
    """The intent model's shape without its training: the base encoder with a RANDOM head
    (timing only), for a machine where build/bert_intent was not built."""
    from tsbatch.build.intent.train import IntentClassifier, load_encoder, save_tokenizer

    settings = load_manifest().model("bert_intent").settings
    max_length = int(settings.get("max_length", 64))
    base = str(settings.get("base_model"))
    torch.manual_seed(0)
    model = IntentClassifier(load_encoder(base), num_labels=16).eval()
    tokenizer_dir = save_tokenizer(base, work_dir / "tokenizer", max_length)
    return Target(
        name=INTENT_BASE_TARGET,
        sla_model="bert_intent",
        description=f"{base} encoder + RANDOM 16-way head, eager PyTorch - timing only (build/bert_intent missing)",
        module=model,
        scenarios=text_scenarios(tokenizer_dir, max_length),
    )


def resolve_target(name: str, work_dir: Path, build_dir: Path | None = None) -> Target:
    if name == IMAGENET_TARGET:
        return imagenet_resnet_target()
    if name == INTENT_BASE_TARGET:
        return intent_base_target(work_dir)
    spec = load_manifest(build_dir=build_dir).model(name)
    missing = [
        f
        for f in (artifacts.MODEL_FILE, artifacts.HANDLER_CONFIG_FILE)
        if not (spec.artifact_dir / f).exists()
    ]
    if missing:
        raise FileNotFoundError(f"{name}: {spec.artifact_dir} lacks {missing}; run `make archive` first")
    if spec.kind == "image":
        return archive_image_target(name, spec.artifact_dir)
    return archive_text_target(name, spec.artifact_dir)


# ---------------------------------------------------------------- measuring
def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or "out of memory" in str(exc).lower()


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])


def drift(reference: torch.Tensor, output: torch.Tensor) -> tuple[float, float, float]:
    """(max |diff|, lowest per-sample cosine similarity, share of equal top-1) of two [n, k] outputs."""
    reference, output = reference.float().reshape(len(reference), -1), output.float().reshape(len(output), -1)
    max_abs = float((reference - output).abs().max())
    cosine = float(torch.nn.functional.cosine_similarity(reference, output, dim=1).min())
    top1 = float((reference.argmax(dim=1) == output.argmax(dim=1)).float().mean())
    return max_abs, cosine, top1


class MemoryProbe:
    """Peak memory of one measurement: CUDA max allocated, or the process RSS on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.process = psutil.Process()
        self.peak = 0

    @property
    def kind(self) -> str:
        return "cuda_max_allocated" if self.device.type == "cuda" else "process_rss"

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.peak = 0

    def sample(self) -> None:
        if self.device.type == "cuda":
            self.peak = max(self.peak, torch.cuda.max_memory_allocated(self.device))
        else:
            self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


@dataclass(frozen=True)
class Budget:
    """How long to time one point: up to ``iters`` timed runs (at least ``min_iters``)
    after up to ``warmup`` runs, both cut short after ``max_seconds``."""

    iters: int = 20
    warmup: int = 3
    min_iters: int = 3
    max_seconds: float = 5.0


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_device(inputs: Inputs, device: torch.device) -> Inputs:
    return tuple(t.to(device) for t in inputs)


def time_batch(
    forward: Callable[[Inputs], torch.Tensor],
    batches: Sequence[Inputs],
    device: torch.device,
    budget: Budget,
    memory: MemoryProbe,
) -> tuple[list[float], torch.Tensor]:
    """Latencies (ms) of timed runs after warm-up, taking the batches in turn, and the
    output of the first batch (the one drift is measured on)."""
    started = time.perf_counter()
    first_output = forward(batches[0])
    synchronize(device)
    for index in range(1, budget.warmup):
        if time.perf_counter() - started > budget.max_seconds / 2:
            break
        forward(batches[index % len(batches)])
        synchronize(device)
    memory.reset()
    latencies: list[float] = []
    started = time.perf_counter()
    while len(latencies) < budget.iters:
        if len(latencies) >= budget.min_iters and time.perf_counter() - started > budget.max_seconds:
            break
        begin = time.perf_counter()
        forward(batches[len(latencies) % len(batches)])
        synchronize(device)
        latencies.append(1000 * (time.perf_counter() - begin))
        memory.sample()
    return latencies, first_output


class References:
    """Each sample's output when run alone at batch 1 (computed once, on demand)."""

    def __init__(
        self, scenario: Scenario, forward: Callable[[Inputs], torch.Tensor], device: torch.device
    ) -> None:
        self.scenario, self.forward, self.device = scenario, forward, device
        self.outputs: dict[int, torch.Tensor] = {}

    def first(self, count: int) -> torch.Tensor:
        for i in range(count):
            if i not in self.outputs:
                self.outputs[i] = self.forward(to_device(self.scenario.single(i), self.device)).float().cpu()
        return torch.cat([self.outputs[i] for i in range(count)])


def sweep_curve(
    target_name: str,
    scenario: Scenario,
    forward: Callable[[Inputs], torch.Tensor],
    precision: str,
    batch_sizes: Sequence[int],
    device: torch.device,
    budget: Budget,
    log: Callable[[str], None] = print,
    fp32_references: References | None = None,
) -> list[SweepRow]:
    """One curve: every batch size in order; stops at the first out-of-memory error."""
    memory = MemoryProbe(device)
    references = References(scenario, forward, device)
    rows: list[SweepRow] = []

    for batch_size in batch_sizes:
        row = SweepRow(
            target_name, scenario.name, precision, device.type, batch_size, "ok", mem_kind=memory.kind
        )
        try:
            batches = [
                to_device(scenario.batch(batch_size, k * batch_size), device)
                for k in range(max(1, min(ROTATIONS, -(-POOL_SIZE // batch_size))))
            ]
            latencies, output = time_batch(forward, batches, device, budget, memory)
            del batches
            output = output.cpu()
            row.max_abs_diff, row.cosine_min, row.top1_agreement = drift(references.first(batch_size), output)
            if fp32_references is not None and precision != "fp32":
                row.fp32_max_abs_diff, _, row.fp32_top1_agreement = drift(
                    fp32_references.first(batch_size), output
                )
        except Exception as exc:  # OOM ends the curve; any other error is recorded too
            oom = is_out_of_memory(exc)
            row.status = "oom" if oom else "error"
            row.note = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            rows.append(row)
            log(
                f"[sweep] {target_name} {scenario.name} {precision} batch {batch_size}: {row.status.upper()} {row.note}"
            )
            if device.type == "cuda":
                torch.cuda.empty_cache()
            break
        row.iterations = len(latencies)
        row.latency_mean_ms = sum(latencies) / len(latencies)
        row.latency_p50_ms = percentile(latencies, 50)
        row.latency_p95_ms = percentile(latencies, 95)
        row.throughput_sps = 1000 * batch_size / row.latency_mean_ms
        row.peak_mem_mb = memory.peak_mb
        row.output_dtype = str(output.dtype).removeprefix("torch.")
        rows.append(row)
        log(
            f"[sweep] {target_name:<18} {scenario.name:<26} {precision} b={batch_size:<3} "
            f"mean {row.latency_mean_ms:8.2f} ms  p95 {row.latency_p95_ms:8.2f} ms  "
            f"{row.throughput_sps:9.1f}/s  mem {row.peak_mem_mb:7.0f} MB  "
            f"drift {row.max_abs_diff:.2e} cos {row.cosine_min:.6f} top1 {row.top1_agreement:.3f}"
        )
    return rows


def module_forward(
    module: torch.nn.Module, device: torch.device, precision: str
) -> Callable[[Inputs], torch.Tensor]:
    def forward(inputs: Inputs) -> torch.Tensor:
        with torch.inference_mode(), autocast(device, precision):
            return module(*inputs)

    return forward


def precision_plan(
    requested: Sequence[str], device: torch.device, cpu_bf16: bool
) -> tuple[list[str], list[str]]:
    """(precisions to run, notes on the skipped ones) for this device."""
    run, notes = [], []
    for precision in requested:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r} (have {PRECISIONS})")
        if device.type == "cuda" or precision == "fp32":
            run.append(precision)
        elif precision == "fp16":
            notes.append("fp16 autocast skipped: no GPU (CPU fp16 autocast is not a serving mode)")
        elif cpu_bf16:
            run.append(precision)
        else:
            notes.append("bf16 autocast skipped on the CPU (pass --cpu-bf16 to run it there)")
    return run, notes


def run_sweep(
    targets: Sequence[Target],
    batch_sizes: Sequence[int],
    device: torch.device,
    precisions: Sequence[str],
    budget: Budget,
    cpu_bf16: bool = False,
    log: Callable[[str], None] = print,
) -> SweepResult:
    result = SweepResult()
    run, notes = precision_plan(precisions, device, cpu_bf16)
    result.notes.extend(notes)
    for note in notes:
        log(f"[sweep] {note}")
    for target in targets:
        module = target.module.to(device)
        served = optimized_or_plain(module) if target.optimize else module
        fp32_forward = module_forward(served, device, "fp32")
        fp32_references = {s.name: References(s, fp32_forward, device) for s in target.scenarios}
        for precision in run:
            forward = fp32_forward if precision == "fp32" else module_forward(module, device, precision)
            for scenario in target.scenarios:
                result.rows.extend(
                    sweep_curve(
                        target.name, scenario, forward, precision, batch_sizes, device, budget, log,
                        fp32_references[scenario.name],
                    )
                )  # fmt: skip
        target.module = module.cpu()
    return result


# ---------------------------------------------------------------- reporting
@dataclass(frozen=True)
class CurveSummary:
    model: str
    scenario: str
    precision: str
    batch_sizes: list[int]
    peak_throughput: float | None
    peak_batch: int | None
    knee: int | None
    within_budget: int | None
    budget_ms: float | None
    max_abs_diff: float | None
    cosine_min: float | None
    top1_min: float | None
    memory_at_knee_mb: float | None
    stopped: str  # "" or why the curve ended early
    fp32_max_abs_diff: float | None = None
    fp32_top1_min: float | None = None

    @property
    def still_rising(self) -> bool:
        """The knee is the largest batch measured: the peak may lie beyond the limit."""
        return bool(self.batch_sizes) and self.knee == max(self.batch_sizes) and len(self.batch_sizes) > 1


def curves(rows: Sequence[SweepRow]) -> Iterator[tuple[tuple[str, str, str], list[SweepRow]]]:
    """Rows grouped by (model, scenario, precision), in first-seen order."""
    groups: dict[tuple[str, str, str], list[SweepRow]] = {}
    for row in rows:
        groups.setdefault((row.model, row.scenario, row.precision), []).append(row)
    yield from groups.items()


def summarize(rows: Sequence[SweepRow], budget_ms: float | None) -> CurveSummary:
    ok = [r for r in rows if r.status == "ok"]
    sizes = [r.batch_size for r in ok]
    throughputs = [float(r.throughput_sps or 0.0) for r in ok]
    knee = knee_batch_size(sizes, throughputs) if ok else None
    peak = max(ok, key=lambda r: r.throughput_sps or 0.0, default=None)
    within = (
        largest_within_budget(sizes, [float(r.latency_p95_ms or 0.0) for r in ok], budget_ms)
        if ok and budget_ms is not None
        else None
    )
    failed = [r for r in rows if r.status != "ok"]
    stopped = (
        f"{failed[0].status.upper()} at batch {failed[0].batch_size} ({failed[0].note})" if failed else ""
    )
    knee_row = next((r for r in ok if r.batch_size == knee), None)
    first = rows[0]
    return CurveSummary(
        model=first.model,
        scenario=first.scenario,
        precision=first.precision,
        batch_sizes=sizes,
        peak_throughput=peak.throughput_sps if peak else None,
        peak_batch=peak.batch_size if peak else None,
        knee=knee,
        within_budget=within,
        budget_ms=budget_ms,
        max_abs_diff=max((r.max_abs_diff for r in ok if r.max_abs_diff is not None), default=None),
        cosine_min=min((r.cosine_min for r in ok if r.cosine_min is not None), default=None),
        top1_min=min((r.top1_agreement for r in ok if r.top1_agreement is not None), default=None),
        memory_at_knee_mb=knee_row.peak_mem_mb if knee_row else None,
        stopped=stopped,
        fp32_max_abs_diff=max(
            (r.fp32_max_abs_diff for r in ok if r.fp32_max_abs_diff is not None), default=None
        ),
        fp32_top1_min=min(
            (r.fp32_top1_agreement for r in ok if r.fp32_top1_agreement is not None), default=None
        ),
    )


def write_csv(rows: Sequence[SweepRow], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})


def read_csv(path: Path) -> list[SweepRow]:
    """Rows back from sweep.csv, typed (what the plots and the summary are made from)."""
    types = {f.name: f.type for f in fields(SweepRow)}
    rows = []
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for key, text in raw.items():
                kind = str(types[key])
                if kind == "int":
                    values[key] = int(text)
                elif "float" in kind:
                    values[key] = float(text) if text != "" else None
                else:
                    values[key] = text
            rows.append(SweepRow(**values))
    return rows


def fmt(value: float | None, spec: str = ".1f", missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def render_summary(
    summaries: Sequence[CurveSummary], meta: dict[str, Any], notes: Sequence[str], plots: dict[str, str]
) -> str:
    lines = [
        "# Batch-size sweep (in-process)",
        "",
        f"- device: {meta['device']}; torch {meta['torch']}; threads {meta['threads']}; "
        f"{meta['iters']} timed runs per point after {meta['warmup']} warm-up (fewer when a point passes "
        f"{meta['max_seconds']:g} s)",
        f"- knee = smallest batch reaching {KNEE_FRACTION:.0%} of peak throughput; budget = largest batch whose "
        "p95 batch latency (and every smaller batch's) stays within the latency budget",
        "- drift = each sample's output in the batch against the same sample alone at batch 1, same precision; "
        "'vs fp32' = against the sample alone at batch 1 in fp32",
        "- memory: "
        + ("CUDA max allocated" if meta["device_type"] == "cuda" else "process RSS (whole process)"),
        f"- inputs: each point times up to {ROTATIONS} different batches in turn; text batches are our utterances "
        "padded to the longest of each batch, one forward pass (the served handler may split a batch by length)",
    ]
    for model, description in meta["models"].items():
        lines.append(f"- **{model}**: {description}")
    lines += [f"- note: {note}" for note in notes]
    lines += [
        "",
        "| model | inputs | precision | peak samples/s (batch) | knee | largest batch within budget | "
        "max abs diff | min cosine | min top-1 agree | vs fp32: max abs diff / top-1 | mem at knee (MB) | stopped early |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        budget = "-" if s.budget_ms is None else f"{s.within_budget or 'none'} (p95 <= {s.budget_ms:g} ms)"
        knee = f"{s.knee} (still rising at the limit)" if s.still_rising else str(s.knee)
        vs_fp32 = (
            "-"
            if s.precision == "fp32"
            else f"{fmt(s.fp32_max_abs_diff, '.2e')} / {fmt(s.fp32_top1_min, '.3f')}"
        )
        lines.append(
            f"| {s.model} | {s.scenario} | {s.precision} | {fmt(s.peak_throughput)} ({s.peak_batch}) | "
            f"{knee} | {budget} | {fmt(s.max_abs_diff, '.2e')} | {fmt(s.cosine_min, '.6f')} | "
            f"{fmt(s.top1_min, '.3f')} | {vs_fp32} | {fmt(s.memory_at_knee_mb, '.0f')} | {s.stopped or '-'} |"
        )
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"- {key}: ![{key}]({name})" for key, name in plots.items()]
    return "\n".join(lines) + "\n"


def default_budget(sla_model: str, profile: str | None) -> float | None:
    """Half the SLA's p99: the other half is left to the batch delay and queueing."""
    try:
        return load_sla(sla_model, profile).p99_ms / 2
    except SlaError:
        return None


def write_reports(
    result: SweepResult,
    targets: Sequence[Target],
    out_dir: Path,
    meta: dict[str, Any],
    budgets: dict[str, float | None],
) -> dict[str, Path]:
    """CSV, one plot per model and precision (made from the CSV read back) and summary.md."""
    try:
        from tsbatch.analysis.plots import plot_sweep
    except ImportError as exc:  # a bare machine without matplotlib still gets the CSV and summary
        plot_sweep = None
        result.notes.append(f"plots skipped: {exc}")
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "sweep.csv"
    write_csv(result.rows, csv_path)
    rows = read_csv(csv_path)
    plots: dict[str, str] = {}
    by_plot: dict[tuple[str, str], list[SweepRow]] = {}
    for row in rows:
        by_plot.setdefault((row.model, row.precision), []).append(row)
    for (model, precision), plot_rows in by_plot.items():
        if plot_sweep is None:
            break
        name = f"{model}_{precision}.png"
        plot_sweep(plot_rows, out_dir / name, f"{model} ({precision}, {meta['device']})", budgets.get(model))
        plots[f"{model} {precision}"] = name
    summaries = [summarize(group, budgets.get(key[0])) for key, group in curves(rows)]
    meta = {**meta, "models": {t.name: t.description for t in targets}}
    summary_path = out_dir / "summary.md"
    summary_path.write_text(render_summary(summaries, meta, result.notes, plots))
    (out_dir / "sweep.json").write_text(json.dumps({"meta": meta, "notes": result.notes}, indent=2) + "\n")
    return {"csv": csv_path, "summary": summary_path, **{k: out_dir / v for k, v in plots.items()}}


# ---------------------------------------------------------------- CLI
def default_targets() -> list[str]:
    manifest = load_manifest()
    return list(manifest.models)


def default_threads(target: str) -> int:
    """The worker's torchThreads from config.properties, so in-process numbers compare with served ones."""
    from tsbatch.config.properties import model_settings, read_properties

    try:
        settings = model_settings(read_properties(REPO_ROOT / "config.properties"))
        return int(settings.get(target, {}).get("torchThreads", 1))
    except (OSError, ValueError):
        return 1


def parse_sizes(text: str) -> list[int]:
    return sorted({int(part) for part in text.split(",") if part.strip()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--target",
        action="append",
        help=f"manifest model (default: all of them), or {IMAGENET_TARGET} / {INTENT_BASE_TARGET} (random weights, timing only)",
    )
    parser.add_argument(
        "--max-batch", type=int, default=64, help="largest batch size (powers of two up to it)"
    )
    parser.add_argument(
        "--batch-sizes", type=parse_sizes, help="explicit list, e.g. 1,3,8 (overrides --max-batch)"
    )
    parser.add_argument("--iters", type=int, default=20, help="timed runs per point")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up runs per point")
    parser.add_argument("--max-seconds", type=float, default=5.0, help="cut a point's timed runs after this")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--cpu-bf16", action="store_true", help="also run bf16 autocast on the CPU")
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads (default: torchThreads in config.properties)"
    )
    parser.add_argument(
        "--latency-budget-ms", type=float, help="p95 batch latency budget (default: SLA p99 / 2)"
    )
    parser.add_argument(
        "--profile", help="SLA profile for the default budget (default: gpu on a GPU, else cpu)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--skip-missing", action="store_true", help="report unbuilt models instead of failing"
    )
    parser.add_argument("--build-dir", type=Path, help="where the exported models are (default: build/)")
    args = parser.parse_args(argv)

    device = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    )
    if device.type == "cuda" and not torch.cuda.is_available():
        print("[sweep] FAILED: --device cuda but torch sees no GPU", file=sys.stderr)
        return 1
    names = args.target or default_targets()
    threads = args.threads or max(default_threads(name) for name in names)
    torch.set_num_threads(threads)
    profile = args.profile or (None if device.type == "cpu" else "gpu")
    sizes = args.batch_sizes or power_of_two_batch_sizes(args.max_batch)
    budget = Budget(
        iters=args.iters, warmup=args.warmup, min_iters=min(3, args.iters), max_seconds=args.max_seconds
    )

    targets: list[Target] = []
    missing: list[str] = []
    work_dir = Path(tempfile.mkdtemp(prefix="sweep-"))  # the base intent model's tokenizer, if needed
    for name in names:
        try:
            targets.append(resolve_target(name, work_dir, args.build_dir))
        except (OSError, ImportError, RuntimeError, ValueError) as exc:
            if not args.skip_missing:
                print(f"[sweep] FAILED: {exc}", file=sys.stderr)
                return 1
            missing.append(f"{name} not swept: {type(exc).__name__}: {exc}")
            print(f"[sweep] {missing[-1]}")
    if not targets:
        print("[sweep] FAILED: nothing to sweep", file=sys.stderr)
        return 1

    started = time.perf_counter()
    try:
        result = run_sweep(targets, sizes, device, args.precisions.split(","), budget, args.cpu_bf16)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    result.notes.extend(missing)
    if device.type == "cuda":
        result.notes.append(
            f"fp32 convolutions may use TF32 (torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
            f"matmul allow_tf32={torch.backends.cuda.matmul.allow_tf32})"
        )
    meta = {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU ({platform.processor() or platform.machine()})",
        "device_type": device.type,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "iters": budget.iters,
        "warmup": budget.warmup,
        "max_seconds": budget.max_seconds,
        "batch_sizes": list(sizes),
        "seconds": round(time.perf_counter() - started, 1),
    }
    budgets = {t.name: args.latency_budget_ms or default_budget(t.sla_model, profile) for t in targets}
    paths = write_reports(result, targets, args.out, meta, budgets)
    print((args.out / "summary.md").read_text())
    print(
        f"[sweep] {len(result.rows)} points in {meta['seconds']} s; wrote {', '.join(str(p) for p in paths.values())}"
    )
    if any(row.status == "error" for row in result.rows):
        print(
            "[sweep] some points failed with errors other than out-of-memory (see the CSV note column)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
