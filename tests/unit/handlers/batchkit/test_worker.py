"""Loading TorchScript for serving: the optimized module, its check, and the fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from batchkit.worker import load_torchscript
from tests.conftest import TinyImageNet


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "model.pt"
    torch.jit.script(TinyImageNet().eval()).save(str(path))
    return path


def sample(batch: int = 3) -> torch.Tensor:
    return torch.randn(batch, 3, 16, 16, generator=torch.Generator().manual_seed(1))


def test_optimized_module_folds_batch_norm_and_keeps_the_answers(artifact: Path) -> None:
    plain = load_torchscript(artifact, torch.device("cpu"))
    optimized = load_torchscript(artifact, torch.device("cpu"), optimize=True, check_input=sample(2))
    assert "batch_norm" in str(plain.inlined_graph)
    assert "batch_norm" not in str(optimized.graph)
    with torch.inference_mode():
        for size in (1, 3, 5):  # other batch sizes than the check's
            assert torch.allclose(optimized(sample(size)), plain(sample(size)), atol=1e-5)


def test_module_that_fails_its_check_is_served_plain(artifact: Path) -> None:
    # The same check input the optimized module passes above, but no module can be within a
    # negative tolerance: only the check can have rejected it.
    model = load_torchscript(artifact, torch.device("cpu"), optimize=True, check_input=sample(2), atol=-1.0)
    assert "batch_norm" in str(model.inlined_graph)


def test_module_that_cannot_be_optimized_is_served_plain(artifact: Path) -> None:
    # A check input of the wrong shape makes the optimized run raise: still no crash.
    model = load_torchscript(artifact, torch.device("cpu"), optimize=True, check_input=torch.zeros(2, 5))
    assert "batch_norm" in str(model.inlined_graph)
