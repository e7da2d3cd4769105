"""A text classifier's hooks into the core's build (``tsbatch.archive.build``): its model
read or trained, traced and verified; its gate plan; its handler-config fields.

``tsbatch.archive.pipeline`` calls :func:`export` for each ``kind: text`` entry (``make
archive``). The classifier is yours (``weights: {path: DIR}``, a ``save_pretrained`` folder
read by ``user_model``) or, when no weights are given, fine-tuned here on ``data``. Both go
through the same steps: the build fails (an exception, non-zero exit) when the model misses
its quality gates or when the TorchScript model does not match the eager one, at several
batch sizes and lengths, and a padded row does not match the same text alone, within the
manifest's ``verify.atol``, or when the traced code names a device (it must follow
``map_location`` onto the worker's GPU). Writes into ``build/<model>/``: ``model.pt``,
``labels.json``, ``handler_config.json``, ``build_info.json``, ``tokenizer/`` and the
report (``report.json``, ``report.md``).

    tsbatch export --model MODEL --weights DIR [--test test.csv]
    tsbatch export --model MODEL [--base-model DIR] [--data-format clinc150 --data FILE]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from text_serving.text import load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.archive import artifacts
from tsbatch.archive.build import GatePlan, Verified, build
from tsbatch.archive.compiled import CompileSettings
from tsbatch.archive.manifest import ModelSpec
from tsbatch.kinds.text.cli import build_and_report
from tsbatch.kinds.text.data import TrainingError
from tsbatch.kinds.text.gating import labelled_gate_inputs, text_gate_plan
from tsbatch.kinds.text.model import TOKENIZER_DIR, ReadyClassifier
from tsbatch.kinds.text.pretrained import hugging_face_difference
from tsbatch.kinds.text.report import REPORT_JSON, train_from_settings
from tsbatch.kinds.text.schema import TextModel
from tsbatch.kinds.text.user_model import from_folder

VERIFY_LENGTHS = (1, 7, 23)  # plus max_length; token counts of the random verification rows


class ExportError(TrainingError):
    """The TorchScript model could not be built or did not match the eager model."""


def trace(
    model: torch.nn.Module, example_ids: torch.Tensor, example_mask: torch.Tensor
) -> torch.jit.ScriptModule:
    """Trace on a padded batch so the attention-mask path is what gets recorded."""
    model.eval()
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings from the HF code and jit deprecation notes
        traced = torch.jit.trace(model, (example_ids, example_mask), check_trace=False)
    return traced


def pinned_devices(module: torch.jit.ScriptModule) -> list[str]:
    """Lines of the TorchScript code that name a device: such a model runs only there."""
    lines = []
    for name, submodule in [("", module), *module.named_modules()]:
        code = getattr(submodule, "code", "")
        lines += [
            f"{name or 'model'}: {line.strip()}" for line in code.splitlines() if "torch.device(" in line
        ]
    return lines


def vocabulary_size(model: torch.nn.Module) -> int:
    """The vocabulary of the Hugging Face model inside ``model`` (an encoder or a classifier)."""
    from transformers import PreTrainedModel

    return next(int(part.config.vocab_size) for part in model.modules() if isinstance(part, PreTrainedModel))


def random_batch(
    batch_size: int, length: int, vocab_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows shaped like tokenizer output: [CLS] ... [SEP], random real lengths, padded."""
    ids = torch.randint(min(1000, vocab_size // 2), vocab_size, (batch_size, length), generator=generator)
    mask = torch.zeros(batch_size, length, dtype=torch.long)
    for row in range(batch_size):
        real = length if row == 0 else int(torch.randint(1, length + 1, (1,), generator=generator))
        mask[row, :real] = 1
        ids[row, real:] = 0
    return ids, mask


def verify(
    traced: torch.jit.ScriptModule,
    eager: torch.nn.Module,
    tokenizer_dir: Path,
    texts: Sequence[str],
    max_length: int,
    atol: float,
    batch_sizes: Sequence[int],
) -> dict[str, float]:
    """Traced vs eager on many shapes, and each text alone vs inside padded batches."""
    generator = torch.Generator().manual_seed(1234)
    vocab_size = vocabulary_size(eager)
    report: dict[str, float] = {}
    with torch.inference_mode():
        for size in batch_sizes:
            for length in sorted({*VERIFY_LENGTHS, max_length}):
                ids, mask = random_batch(size, max(1, min(length, max_length)), vocab_size, generator)
                difference = (traced(ids, mask) - eager(ids, mask)).abs().max()
                report[f"traced_vs_eager_batch{size}_len{length}"] = float(difference)
        tokenizer = load_tokenizer(tokenizer_dir, max_length)
        padding = pad_id(tokenizer)
        rows = tokenize(tokenizer, texts).ids
        alone = torch.cat([traced(*pad_to_longest([row], padding)) for row in rows])
        batched = traced(*pad_to_longest(rows, padding))
        report["padded_batch_vs_alone"] = float((batched - alone).abs().max())
        full_ids = torch.full((len(rows), max_length), padding, dtype=torch.long)
        full_mask = torch.zeros(len(rows), max_length, dtype=torch.long)
        for index, row in enumerate(rows):
            full_ids[index, : len(row)] = torch.as_tensor(row)
            full_mask[index, : len(row)] = 1
        report["padded_to_max_length_vs_alone"] = float((traced(full_ids, full_mask) - alone).abs().max())
        if torch.cuda.is_available():
            ids, mask = random_batch(max(batch_sizes), 19, vocab_size, generator)
            on_gpu = traced.to("cuda")(ids.cuda(), mask.cuda()).cpu()
            report["cuda_vs_cpu"] = float((on_gpu - eager(ids, mask)).abs().max())
            traced.to("cpu")
    pinned = pinned_devices(traced)
    if pinned:
        raise ExportError(
            f"the TorchScript model is pinned to a device (it must follow map_location): {pinned[:3]}"
        )
    failures = {key: value for key, value in report.items() if not value <= atol}
    worst = max(report, key=lambda key: report[key])
    print(f"[export] verified {len(report)} checks; worst {worst} = {report[worst]:.2e} (atol {atol:g})")
    if failures:
        raise ExportError(f"TorchScript verification failed beyond atol {atol}: {failures}")
    return report


def verification_texts(texts: Sequence[str], count: int = 12) -> list[str]:
    """Real texts of spread-out lengths: shortest, longest and between."""
    texts = sorted(set(texts), key=len)
    if len(texts) <= count:
        return texts
    step = (len(texts) - 1) / (count - 1)
    return [texts[round(i * step)] for i in range(count)]


def trained_classifier(spec: ModelSpec, settings: TextModel, out: Path) -> ReadyClassifier:
    """The fallback when no weights are given: fine-tune ``base_model`` on ``data``."""
    data, trained, report = train_from_settings(spec, settings, out)
    splits = {"test": data.test, **({"blind": data.blind} if data.blind else {})}
    threshold = report["oos_threshold"]
    texts, score = labelled_gate_inputs(trained.labels, splits, threshold, settings.oos_label)
    return ReadyClassifier(
        model=trained.model,
        labels=trained.labels,
        tokenizer_dir=trained.tokenizer_dir,
        settings=settings,
        threshold=threshold,
        gate_texts=texts,
        score=score,
        description=report["base_model"],
        build_info={
            "weights": {"source": f"fine-tuned here from {report['base_model']}"},
            "base_model": report["base_model"],
            "data": data.source,
            "oos_threshold": threshold,
            "test": {
                key: report["test"][key] for key in ("in_scope_accuracy", "oos_recall", "oos_precision")
            },
            "training": report["training"],
            "training_seconds": report["training_seconds"],
        },
    )


def note_verification(out: Path, verification: dict[str, float], atol: float) -> None:
    """One line in report.md on the TorchScript checks (build_info.json has each figure)."""
    worst = max(verification, key=lambda key: verification[key])
    path = out / artifacts.REPORT_MARKDOWN
    path.write_text(
        path.read_text().rstrip()
        + f"\n\nTorchScript (model.pt) verified against the eager model: {len(verification)} checks "
        f"(batch sizes x lengths, padded vs alone), worst {worst} = {verification[worst]:.2e} <= atol {atol:g}.\n"
    )


class TextBuild:
    """The text kind's hooks into the core's build (``tsbatch.archive.build``): your folder
    read (``weights``) or a classifier trained here, traced, verified on many shapes and
    against the Hugging Face model, gated on its test (and blind) texts."""

    ready: ReadyClassifier
    texts: list[str]

    def __init__(self, spec: ModelSpec, settings: TextModel) -> None:
        self.spec, self.settings = spec, settings
        self.started = time.perf_counter()

    def load(self, out: Path) -> TextModel:
        self.out = out
        (out / REPORT_JSON).unlink(missing_ok=True)  # an earlier build's
        if self.settings.weights is not None:
            self.ready = from_folder(self.spec, self.settings, out)
        else:
            self.ready = trained_classifier(self.spec, self.settings, out)
        self.texts = verification_texts(next(iter(self.ready.gate_texts.values())))
        return self.ready.settings

    def torchscript(self) -> torch.jit.ScriptModule:
        ready = self.ready
        tokenizer = load_tokenizer(ready.tokenizer_dir, ready.settings.max_length)
        rows = tokenize(tokenizer, self.texts[:: max(1, len(self.texts) // 3)]).ids
        return trace(ready.model, *pad_to_longest(rows, pad_id(tokenizer)))

    def verify(self, torchscript: torch.jit.ScriptModule) -> Verified:
        ready, settings = self.ready, self.ready.settings
        atol, max_length = settings.verify.atol, settings.max_length
        batch_sizes = list(settings.verify.batch_sizes)
        verification = verify(
            torchscript, ready.model, ready.tokenizer_dir, self.texts, max_length, atol, batch_sizes
        )
        if ready.reference is not None:
            difference = hugging_face_difference(
                torchscript, ready.reference, ready.tokenizer_dir, self.texts, max_length
            )
            verification["traced_vs_hugging_face"] = difference
            if not difference <= atol:
                raise ExportError(
                    f"the TorchScript differs from the Hugging Face model by {difference:.2e} (atol {atol})"
                )
        note_verification(self.out, verification, atol)
        return Verified(verification)

    def gate_plan(self, settings: CompileSettings, torchscript: torch.jit.ScriptModule | None) -> GatePlan:
        ready = self.ready
        return text_gate_plan(
            settings,
            ready.settings.max_length,
            ready.model,
            ready.tokenizer_dir,
            ready.gate_texts,
            ready.score,
        )

    def labels(self) -> list[str]:
        return self.ready.labels

    def handler_fields(self, out: Path, served: torch.nn.Module | None) -> dict[str, Any]:
        """Every TextModelConfig field the build finds (torch_threads: packaging adds it)."""
        return {
            "tokenizer_dir": TOKENIZER_DIR,
            "base_model": self.ready.description,
            "oos_threshold": float(self.ready.threshold),
        }

    def build_info(self) -> dict[str, Any]:
        return {
            **self.ready.build_info,
            "num_labels": len(self.ready.labels),
            "max_length": self.ready.settings.max_length,
            "export_seconds": round(time.perf_counter() - self.started, 1),
        }

    def libraries(self) -> dict[str, str]:
        import transformers

        return {"transformers": transformers.__version__}

    def description(self) -> str:
        return self.ready.description


def export(spec: ModelSpec, settings: TextModel | None = None, out: Path | None = None) -> Path:
    """Read your folder (``weights``) or train, then trace, verify, gate and write
    ``build/<model>/``; raises when a gate or a check fails."""
    settings = settings if settings is not None else spec.entry_as(TextModel)
    return build(spec, TextBuild(spec, settings), out)


def export_with_options(spec: ModelSpec, args: argparse.Namespace) -> int:
    """``tsbatch export`` for a text model: its entry with the command-line overrides
    (``tsbatch.kinds.text.options``), then the report."""
    return build_and_report(spec, args, export, "export")
