"""A TorchServe worker's setup: its device, its thread pool and the TorchScript module it
loads (frozen and optimized where that checks out). Which runtime serves is
``batchkit.loader``'s choice."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)


def select_device(system_properties: dict[str, Any]) -> torch.device:
    """The GPU TorchServe assigned to this worker, or the CPU when it assigned none."""
    gpu_id = system_properties.get("gpu_id")
    if gpu_id is not None and torch.cuda.is_available():
        return torch.device(f"cuda:{int(gpu_id)}")
    return torch.device("cpu")


def configure_threads(intra_op_threads: int) -> None:
    """Pin PyTorch's CPU thread pools for this worker process.

    Each TorchServe worker is its own process; left alone, every worker takes every core
    and they fight (two stock workers on 2 cores ran at a quarter of one). The archive's
    config says how many threads one worker may use.
    """
    if intra_op_threads <= 0:
        return
    torch.set_num_threads(intra_op_threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        logger.debug("inter-op threads already fixed for this process")


def optimize_for_serving(model: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """Freeze a TorchScript module and apply PyTorch's inference passes.

    Freezing inlines weights as constants and folds batch norm into the convolutions;
    ``optimize_for_inference`` then picks oneDNN layouts on CPU. Measured on this
    project's 2-core CPU (resnet18, batch 8, 1 thread): 127 ms per batch against 170 ms
    for the plain module at one fixed batch size and about 200 ms once it has seen mixed
    batch sizes, as a serving worker does. The result is tied to this machine's build
    (PyTorch does not support saving it), so workers do it at load time.
    """
    return torch.jit.optimize_for_inference(torch.jit.freeze(model.eval()))


def optimized_or_plain(
    model: torch.jit.ScriptModule,
    check_input: torch.Tensor | None = None,
    atol: float = 1e-4,
    label: str = "the module",
) -> torch.jit.ScriptModule:
    """The optimized module when the passes work (and, given ``check_input``, agree with the
    plain module within ``atol`` on it); otherwise the plain module, with a warning.

    Call it after the module is on its device (and give ``check_input`` there too):
    freezing bakes the weights in where they are.
    """
    try:
        optimized = optimize_for_serving(model)
        if check_input is not None:
            with torch.inference_mode():
                difference = float((optimized(check_input).float() - model(check_input).float()).abs().max())
            if not difference <= atol:
                raise ValueError(f"optimized outputs differ by {difference:.2e} (atol {atol:g})")
    except Exception as exc:  # a prototype pass must never stop the worker
        logger.warning("serving %s unoptimized: %s", label, exc)
        return model
    return optimized


def load_torchscript(
    path: str | Path,
    device: torch.device,
    optimize: bool = False,
    check_input: torch.Tensor | None = None,
    atol: float = 1e-4,
) -> torch.jit.ScriptModule:
    """Load a TorchScript artifact for inference on ``device``, optimized when asked and safe."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.jit.load(str(path), map_location=device).eval()
    if not optimize:
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # TorchScript is what TorchServe runs
        sample = None if check_input is None else check_input.to(device)
        return optimized_or_plain(model, sample, atol, label=Path(path).name)
