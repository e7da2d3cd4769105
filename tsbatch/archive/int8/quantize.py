"""Quantize a model to int8 and compile it into an AOTInductor package.

The CNN gets static post-training quantization (torchao PT2E with the x86 Inductor
quantizer): activations' scales come from calibration batches of the build's own data, and
the compiled code calls oneDNN's fused quantized convolutions. The text model gets dynamic
quantization of its linear layers (int8 weights, per-token int8 activations), which needs no
calibration and keeps each row of a batch independent of the others.

A kind whose model PT2E cannot capture as it is (the image kind's residual blocks, which
call one ReLU several times) hands a rewrite of it as ``prepare``; the core knows no
architecture. Both are exported with the serving model's dynamic shapes *before*
quantizing, and the converted module is exported again with the same shapes. Freezing must be on: without it
Inductor does not fuse the quantized patterns and the package silently runs fp32 (ao issue
4566), so :func:`quantized_op_counts` reads the generated C++ back out of the package.
"""

from __future__ import annotations

import copy
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from tsbatch.archive.aoti import export_and_compile

Batch = tuple[torch.Tensor, ...]
Prepare = Callable[[torch.nn.Module], torch.nn.Module]  # a kind's rewrite before quantizing

# Names in the generated code that only quantized kernels have: oneDNN's fused int8
# convolution / linear, and the int8 x int8 -> int32 matmul of dynamic quantization.
QUANTIZED_OPS = ("qconv", "qlinear", "_int_mm")


def static_int8(
    model: torch.nn.Module,
    example: Batch,
    dynamic_shapes: tuple[dict[int, Any], ...],
    calibration: Sequence[Batch],
    prepare: Prepare | None = None,
) -> torch.nn.Module:
    """PT2E static quantization, calibrated on ``calibration`` (the converted graph module);
    ``prepare`` returns a copy of the model that PT2E can capture (default: a plain copy)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    eager = (prepare or copy.deepcopy)(model).eval().float()
    captured = torch.export.export(eager, example, dynamic_shapes=dynamic_shapes).module()
    quantizer = X86InductorQuantizer()
    quantizer.set_global(get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(captured, quantizer)
    size = len(example[0])  # calibration runs within the exported batch bound
    with torch.no_grad():
        for batch in calibration:
            for start in range(0, len(batch[0]), size):
                prepared(*(x[start : start + size] for x in batch))
    return convert_pt2e(prepared)


def dynamic_int8(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` with int8 weights and per-token dynamic int8 activations in every
    linear layer (torchao ``Int8DynamicActivationInt8WeightConfig``)."""
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    quantized = copy.deepcopy(model).eval().float()
    quantize_(quantized, Int8DynamicActivationInt8WeightConfig())
    return quantized


def compile_int8(
    model: torch.nn.Module,
    example: Batch,
    dynamic_shapes: tuple[dict[int, Any], ...],
    path: Path,
    calibration: Sequence[Batch] | None,
    prepare: Prepare | None = None,
) -> dict[str, float]:
    """Quantize ``model`` (static when calibration batches are given, else dynamic linear
    layers; ``prepare``: the kind's rewrite for static PT2E capture), export it with
    ``dynamic_shapes`` and compile it with freezing into ``path``; ``calibration_items`` 0 in
    the figures means dynamic."""
    started = time.perf_counter()
    inputs = tuple(x.contiguous() for x in example)
    if calibration is None:
        quantized = dynamic_int8(model)
    else:
        quantized = static_int8(model, inputs, dynamic_shapes, calibration, prepare)
    quantize_seconds = time.perf_counter() - started
    figures = export_and_compile(quantized, inputs, dynamic_shapes, path)
    ops = quantized_op_counts(path)
    figures.update(
        calibration_items=sum(len(batch[0]) for batch in calibration or ()),
        quantize_seconds=round(quantize_seconds, 1),
        quantized_ops=sum(ops.values()),
    )
    print(f"[export] compiled {path.name}: {figures} (quantized kernels: {ops})")
    return figures


def quantized_op_counts(path: Path) -> dict[str, int]:
    """How often the package's generated C++ names each quantized kernel (all zero: the
    quantized graph was compiled back to fp32 kernels)."""
    with zipfile.ZipFile(path) as package:
        source = "".join(
            package.read(name).decode(errors="replace")
            for name in package.namelist()
            if name.endswith(".cpp")
        )
    return {op: source.count(op) for op in QUANTIZED_OPS}
