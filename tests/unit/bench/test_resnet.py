"""The ResNet benchmark's closing line (the served runs need a server: make bench)."""

from __future__ import annotations

from batchkit.candidates import BASELINE, ServingCandidate
from tsbatch.bench.resnet import int8_line, speedup_line


def test_speedup_line_compares_the_default_with_the_baseline() -> None:
    default = ServingCandidate("aoti", "cpu", "fp32")
    line = speedup_line({BASELINE: 40.0, default: 50.0}, default)
    assert line == "speedup vs fp32 TorchScript served: 1.25x (aoti fp32)"
    assert "n/a" in speedup_line({BASELINE: 40.0}, default)


def test_int8_line_compares_the_int8_row_with_fp32_and_the_best_bf16_row() -> None:
    int8 = ServingCandidate("aoti", "cpu", "int8")
    served = {
        BASELINE: 40.0,
        ServingCandidate("torchscript", "cpu", "bf16"): 60.0,
        ServingCandidate("aoti", "cpu", "bf16"): 64.0,
        int8: 120.0,
    }
    assert int8_line(served) == "int8 served: 3.00x fp32 TorchScript served, 1.88x the best bf16 row"
    assert int8_line({BASELINE: 40.0, int8: 100.0}) == "int8 served: 2.50x fp32 TorchScript served"
    assert int8_line({BASELINE: 40.0}) is None
