"""Stand-ins for TorchServe's worker objects (unit tests of handlers without a server) and
hostile inputs that several suites send."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RecordedMetric:
    name: str
    metric_type: Any
    values: list[tuple[float, list[str]]] = field(default_factory=list)

    def add_or_update(
        self, value: float, dimension_values: list[str] | None = None, request_id: str = ""
    ) -> None:
        self.values.append((value, list(dimension_values or [])))


class RecordingMetrics:
    """Accepts the metrics declared in metrics.yaml, like TorchServe's cache, and keeps them."""

    def __init__(self, declared: dict[str, Any]) -> None:
        self.metrics = {name: RecordedMetric(name, kind) for name, kind in declared.items()}

    def get_metric(self, name: str, metric_type: Any) -> RecordedMetric:
        metric = self.metrics.get(name)
        if metric is None or metric.metric_type != metric_type:
            raise KeyError(name)
        return metric


class FakeContext:
    """The parts of ``ts.context.Context`` the handlers use."""

    def __init__(
        self, model_dir: Path, model_yaml_config: dict[str, Any], batch_size: int = 8, metrics: Any = None
    ) -> None:
        self.system_properties = {"model_dir": str(model_dir), "gpu_id": None, "batch_size": batch_size}
        self.model_yaml_config = model_yaml_config
        self.metrics = metrics
        self.statuses: dict[int, tuple[int, str]] = {}
        self.content_types: dict[int, str] = {}
        self.request_headers: dict[int, dict[str, str]] = {}
        self.response_headers: dict[int, dict[str, str]] = {}

    def set_response_status(self, code: int = 200, phrase: str = "", idx: int = 0) -> None:
        self.statuses[idx] = (code, phrase)

    def set_response_content_type(self, idx: int, value: str) -> None:
        self.content_types[idx] = value

    def get_all_request_header(self, idx: int) -> dict[str, str]:
        return self.request_headers.get(idx, {})

    def set_response_header(self, idx: int, key: str, value: str) -> None:
        self.response_headers.setdefault(idx, {})[key] = value

    def status(self, idx: int) -> int:
        return self.statuses.get(idx, (200, ""))[0]


def bomb_png(width: int, height: int) -> bytes:
    """A valid PNG header claiming a huge canvas, with almost no data: a decompression bomb."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )
