"""The ResNet benchmark's closing line (the served runs need a server: make bench)."""

from __future__ import annotations

from tsbatch.bench.resnet import speedup_line
from tsbatch.build.variants import BASELINE, Variant


def test_speedup_line_compares_the_default_with_the_baseline() -> None:
    default = Variant("aoti", "fp32")
    line = speedup_line({BASELINE: 40.0, default: 50.0}, default)
    assert line == "speedup vs fp32 TorchScript served: 1.25x (aoti fp32)"
    assert "n/a" in speedup_line({BASELINE: 40.0}, default)
