"""The image classifier's hooks into the core's build (``tsbatch.archive.build``): its
weights, its TorchScript and verification, its gate plan (held-out images, static int8 on
calibration images with its residual blocks rewritten), its handler-config fields.

Weights are taken from, in order: a path the user gives (a state_dict, their own
TorchScript artifact or a ``torch.export`` program), torchvision's ImageNet weights (local
torch hub cache, then a download), and offline the fallback: the same architecture trained
here on scikit-learn's bundled handwritten digits. Each goes through the same TorchScript
export, verification, gates and packaging; whatever is used is recorded in the artifact.
The build fails (non-zero exit) when verification or the accuracy gate fails.

An exported program whose graph traced into TorchScript fails verification at another
batch size (a network that reshapes by its batch, ``x.view(bs, -1)``: tracing bakes the
traced batch in) has no TorchScript form: the program itself is verified, its AOTInductor
packages are the archive's artifacts, and the build says so.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torchvision

from batchkit.worker import optimize_for_serving
from image_serving.images import check_images
from tsbatch.archive.build import GatePlan, Verified, build
from tsbatch.archive.compiled import CompileSettings, GateData, NothingToServeError
from tsbatch.archive.gates import Batch, Scorer, top1_accuracy
from tsbatch.archive.int8.candidate import Int8Plan
from tsbatch.archive.manifest import ManifestError, ModelSpec
from tsbatch.archive.scripting import script
from tsbatch.kinds.image.calibration import calibration_batches
from tsbatch.kinds.image.decode_gate import gate_reduced_decoding
from tsbatch.kinds.image.digits import train_on_digits
from tsbatch.kinds.image.residual import own_relus
from tsbatch.kinds.image.schema import ImageModel
from tsbatch.kinds.image.weights import (
    ExportedClassifier,
    ExportError,
    ResolvedWeights,
    load_torchvision_weights,
    load_user_weights,
    require_digits_allowed,
)


def resolve_weights(spec: ModelSpec, weights_path: Path | None, labels_path: Path | None) -> ResolvedWeights:
    config = spec.entry_as(ImageModel)
    weights = config.weights
    path = weights_path or (Path(weights.path) if weights.path else None)
    labels = labels_path or (Path(weights.labels) if weights.labels else None)
    if path is not None:
        return load_user_weights(path, labels, config.architecture, config.preprocessing)
    if weights.torchvision:
        resolved = load_torchvision_weights(config.architecture, weights.torchvision, weights.download)
        if resolved is not None:
            return resolved
    require_digits_allowed(config.architecture)
    print("[export] no pretrained weights available: training on scikit-learn digits")
    return train_on_digits(config.architecture, weights.digits)


def to_torchscript(resolved: ResolvedWeights) -> tuple[torch.jit.ScriptModule, str]:
    """The user's TorchScript as is, else the eager model scripted, or traced on a batch of
    two where scripting fails (an exported program's graph, some architectures): tracing
    records one path through the code, which the verification's batch sizes then check."""
    if resolved.scripted is not None:
        return resolved.scripted, "the user's"
    model = resolved.model
    assert model is not None, "ResolvedWeights carries an eager model or TorchScript"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # TorchScript is what TorchServe loads
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # verification checks the trace
        try:
            return script(model), "scripted"
        except Exception as exc:
            print(f"[export] TorchScript by tracing: scripting failed ({type(exc).__name__})")
        example = torch.zeros(2, 3, resolved.crop_size, resolved.crop_size)
        return torch.jit.trace(model, example, check_trace=False), "traced"


def verify(
    resolved: ResolvedWeights,
    scripted: torch.nn.Module,
    atol: float,
    batch_sizes: list[int],
    optimized: torch.jit.ScriptModule | None = None,
) -> dict[str, float]:
    """Scripted vs eager, batch N vs N single runs, and the module workers will run
    (frozen and optimized) vs the reference; raise ExportError beyond atol."""
    largest = max(batch_sizes)
    seeded = torch.Generator().manual_seed(1234)  # same inputs every build, global RNG untouched
    inputs = torch.randn(largest, 3, resolved.crop_size, resolved.crop_size, generator=seeded)
    report: dict[str, float] = {}
    with torch.inference_mode():
        singles = torch.cat([scripted(inputs[i : i + 1]) for i in range(largest)])
        reference = scripted(inputs)
        if resolved.model is not None:
            reference = resolved.model(inputs)
            report["max_abs_diff_scripted_vs_eager"] = float((reference - scripted(inputs)).abs().max())
        for size in batch_sizes:
            batched = scripted(inputs[:size])
            report[f"max_abs_diff_batch{size}_vs_single"] = float((batched - singles[:size]).abs().max())
        if optimized is not None:
            for size in batch_sizes:
                report[f"max_abs_diff_optimized_batch{size}_vs_reference"] = float(
                    (optimized(inputs[:size]) - reference[:size]).abs().max()
                )
    failures = {k: v for k, v in report.items() if not v <= atol}
    for key, value in report.items():
        print(f"[export] verify {key}: {value:.2e} ({'FAIL' if key in failures else 'ok'}, atol {atol:g})")
    if failures:
        raise ExportError(f"verification failed beyond atol {atol}: {failures}")
    return report


def gate_data(resolved: ResolvedWeights, batch_size: int) -> tuple[list[Batch], Scorer | None]:
    """The held-out images in full batches and their accuracy scorer; without labelled data,
    seeded random images (agreement and batch independence only, no accuracy)."""
    if resolved.held_out is None:
        print("[export] no held-out data for these weights: gates check agreement with fp32 only")
        seeded = torch.Generator().manual_seed(4321)
        images = torch.randn(2 * batch_size, 3, resolved.crop_size, resolved.crop_size, generator=seeded)
        return [(chunk,) for chunk in images.split(batch_size)], None
    images, labels = resolved.held_out
    return [(chunk,) for chunk in images.split(batch_size)], top1_accuracy(labels)


def verified_torchscript(
    resolved: ResolvedWeights, config: ImageModel, scripted: torch.jit.ScriptModule, made: str
) -> Verified:
    """The TorchScript module's verification and, for an exported program that does not
    trace into a module serving every batch size, why it has none (the program itself
    verified instead); any other verification failure raises."""
    atol, sizes = config.verify.atol, list(config.verify.batch_sizes)
    try:
        optimized = optimize_for_serving(scripted) if config.optimize else None
        return Verified(verify(resolved, scripted, atol, sizes, optimized=optimized))
    except Exception as exc:
        if not isinstance(resolved.model, ExportedClassifier) or made != "traced":
            raise
        failure = (str(exc).strip().splitlines() or [""])[-1][:200]
        if not failure.startswith(type(exc).__name__):
            failure = f"{type(exc).__name__}: {failure}"
        why = f"the exported program traced into TorchScript serves only the batch size it was traced on ({failure})"
    print(f"[export] no TorchScript: {why}; verifying the program itself, serving its packages")
    if config.runtime == "torchscript":
        raise ExportError(f"runtime: torchscript, but {why}: set runtime to auto or aoti")
    program = resolved.model
    return Verified(verify(replace(resolved, model=None), program, atol, sizes), why)


def channels_last(model: torch.nn.Module, crop_size: int) -> torch.nn.Module:
    """``model`` with channels-last weights (what the packages compile fastest from), or as
    it is where that breaks it (a ``view`` of an activation that is then not contiguous)."""
    try:
        converted = copy.deepcopy(model).to(memory_format=torch.channels_last)
        with torch.inference_mode():
            converted(torch.zeros(2, 3, crop_size, crop_size))
    except RuntimeError as exc:
        print(f"[export] compiling from contiguous weights: channels-last breaks the model ({exc})"[:300])
        return model
    return converted


def image_gate_plan(resolved: ResolvedWeights, config: ImageModel, settings: CompileSettings) -> GatePlan:
    """.pt2 packages for what the build host serves, gated with the TorchScript candidates on
    the held-out images; int8 statically quantized, its ResNet blocks rewritten for PT2E."""
    eager = None if resolved.model is None else channels_last(resolved.model, resolved.crop_size)
    batches, score = gate_data(resolved, min(8, settings.max_batch_size))
    batch = torch.export.Dim("batch", min=1, max=settings.max_batch_size)
    data = GateData(
        batches,
        score,
        check=(check_images(resolved.crop_size),),
        dynamic_shapes=({0: batch},),
        optimize=config.optimize,
    )
    int8 = None
    if eager is not None and any(target.endswith("-int8") for target in settings.targets):
        calibration, source = calibration_batches(resolved, config.compile.calibration)
        # its scorer's one figure, accuracy, keeps the default limit (0.5 points)
        int8 = Int8Plan(calibration, f"static, calibrated on {source}", prepare=own_relus)
    return GatePlan(eager, data, int8)


class ImageBuild:
    """The image kind's hooks into the core's build (``tsbatch.archive.build``)."""

    resolved: ResolvedWeights

    def __init__(self, spec: ModelSpec, weights_path: Path | None, labels_path: Path | None) -> None:
        self.spec, self.config = spec, spec.entry_as(ImageModel)
        self.weights_path, self.labels_path = weights_path, labels_path
        self.made = ""

    def load(self, out: Path) -> ImageModel:
        self.resolved = resolve_weights(self.spec, self.weights_path, self.labels_path)
        return self.config

    def torchscript(self) -> torch.jit.ScriptModule:
        scripted, self.made = to_torchscript(self.resolved)
        return scripted

    def verify(self, torchscript: torch.jit.ScriptModule) -> Verified:
        verified = verified_torchscript(self.resolved, self.config, torchscript, self.made)
        self.made = "none" if verified.no_torchscript else self.made
        return verified

    def gate_plan(self, settings: CompileSettings, torchscript: torch.jit.ScriptModule | None) -> GatePlan:
        return image_gate_plan(self.resolved, self.config, settings)

    def labels(self) -> list[str]:
        return self.resolved.labels

    def handler_fields(self, out: Path, served: torch.nn.Module | None) -> dict[str, Any]:
        resolved = self.resolved
        decoding = gate_reduced_decoding(out, served if served is not None else resolved.model, resolved)
        return {
            "weights": resolved.source,
            "resize_size": resolved.resize_size,
            "crop_size": resolved.crop_size,
            "mean": list(resolved.mean),
            "std": list(resolved.std),
            "optimize_atol": self.config.verify.atol,
            "reduced_decode_gate": dataclasses.asdict(decoding),
        }

    def build_info(self) -> dict[str, Any]:
        return {
            "weights": self.resolved.source,
            "weights_details": self.resolved.details,
            "num_classes": len(self.resolved.labels),
            "torchscript": self.made,
        }

    def libraries(self) -> dict[str, str]:
        return {"torchvision": torchvision.__version__}

    def description(self) -> str:
        return self.resolved.source


def export(spec: ModelSpec, weights_path: Path | None = None, labels_path: Path | None = None) -> Path:
    """Build ``build/<model>/``: TorchScript, labels, handler config and build info."""
    return build(spec, ImageBuild(spec, weights_path, labels_path))


def export_with_options(spec: ModelSpec, args: argparse.Namespace) -> int:
    """``tsbatch export`` for an image model (``--weights``, ``--labels``: see the kind's
    ``export_options``); a failure is one line and exit status 1."""
    try:
        export(spec, args.weights, args.labels)
    except (ExportError, ManifestError, NothingToServeError) as exc:
        print(f"[export] FAILED: {exc}", file=sys.stderr)
        return 1
    return 0
