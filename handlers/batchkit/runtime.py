"""Device and thread placement for a TorchServe worker."""

from __future__ import annotations

import logging
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
