"""What runs inside the image before and around TorchServe: the mounted config wins, drain on stop.

The drain settings are read here, without third-party imports, because deploy/probe.py
(standard library and the toolkit only) shares them with the supervisor.
"""

import time
from pathlib import Path

from tsbatch.environment import Environment


def drain_file() -> Path:
    return Environment.read().drain_file


def drain_seconds() -> float:
    return Environment.read().drain_seconds


def mark_draining(marker: Path) -> float:
    """Create the drain mark (once) and return when draining began (epoch seconds)."""
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{time.time()}\n")
    return marker.stat().st_mtime
