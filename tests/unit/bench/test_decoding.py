"""The bench's decode rows: real decoding of real payloads, the configured row, the
decode-bound verdict and the printed section (the served rows need a server: make bench)."""

from __future__ import annotations

import pytest

from batchkit.candidates import ServingCandidate
from batchkit.config import from_mapping
from image_serving.config import ImageModelConfig
from tests.conftest import tiny_image_handler
from tsbatch.bench.decoding import (
    SETTINGS,
    DecodeRow,
    auto_threads,
    bound_line,
    configured_row,
    decode_rate,
    print_section,
)
from tsbatch.kinds.image.examples import request_pictures

CONFIG = from_mapping(ImageModelConfig, {**tiny_image_handler(), "resize_size": 64, "crop_size": 56})


@pytest.mark.parametrize(("path", "threads"), [("pil", 1), ("tensor", 2)])
def test_decode_rate_decodes_the_bench_payloads(path: str, threads: int) -> None:
    payloads = request_pictures(4, "imagenet")
    assert decode_rate(CONFIG, payloads, path, threads, batch_size=3, seconds=0.05) > 0


def test_a_payload_that_fails_to_decode_stops_the_row() -> None:
    with pytest.raises(RuntimeError, match="failed to decode"):
        decode_rate(CONFIG, [b"not an image"], "pil", 1, batch_size=1, seconds=0.05)


def test_the_configured_row_and_the_decode_bound_verdict() -> None:
    rows = [DecodeRow("pil", 1, 300.0), DecodeRow("pil", 2, 400.0), DecodeRow("tensor", 1, 350.0)]
    assert configured_row(rows, 1, "auto") == rows[2]  # auto on a CPU: the faster path
    assert configured_row(rows, 1, "pil") == rows[0]
    with pytest.raises(ValueError, match="not measured"):
        configured_row(rows, 4, "pil")
    assert bound_line("imagenet", rows[0], 320.0, "aoti int8").startswith(
        "imagenet: decode-bound: decode 300.0"
    )
    assert bound_line("imagenet", rows[1], 320.0, "aoti int8").startswith("imagenet: model-bound")


def test_the_section_prints_every_row_and_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [DecodeRow(path, threads, 100.0 * threads) for path, threads in SETTINGS]
    served = [
        (row.label, {"served_rps": 50.0 * row.threads, "p50_ms": 9.0, "p99_ms": 20.0, "errors": 0})
        for row in rows
    ]
    model_row = {"model_ips": 120.0, "variant": ServingCandidate("aoti", "cpu", "int8")}
    print_section({"shape": "imagenet", "rows": rows, "served": served}, model_row, {"decodeThreads": 1})
    text = capsys.readouterr().out
    assert "pil x2" in text and "tensor x1" in text and "2.00x" in text
    assert "imagenet: decode-bound: decode 100.0 img/s (pil x1, as configured)" in text
    section = {"shape": "imagenet", "rows": rows, "served": served, "auto": 2}  # auto gave these payloads 2
    print_section(section, model_row, {"decodeThreads": "auto", "decodePath": "pil"})
    assert "imagenet: model-bound: decode 200.0 img/s (pil x2, as configured)" in capsys.readouterr().out


def test_auto_decodes_the_bench_s_small_payloads_inline() -> None:
    assert auto_threads(CONFIG, request_pictures(8, "imagenet"), batch_size=8) == 1
