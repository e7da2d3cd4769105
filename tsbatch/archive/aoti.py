"""One export-and-compile step shared by every package the build makes (fp32, bf16, int8)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch


def export_and_compile(
    model: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    dynamic_shapes: tuple[dict[int, Any], ...],
    path: Path,
) -> dict[str, float]:
    """``torch.export`` with ``dynamic_shapes``, then AOTInductor with freezing into ``path``
    (freezing folds the weights in; the int8 fusions fire only with it). Returns the times
    and the package size."""
    started = time.perf_counter()
    with torch.no_grad():
        program = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
        exported = time.perf_counter()
        torch._inductor.aoti_compile_and_package(
            program, package_path=str(path), inductor_configs={"freezing": True}
        )
    return {
        "export_seconds": round(exported - started, 1),
        "compile_seconds": round(time.perf_counter() - exported, 1),
        "megabytes": round(path.stat().st_size / 2**20, 1),
    }
