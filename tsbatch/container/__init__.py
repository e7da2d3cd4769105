"""What runs inside the image before and around TorchServe: the mounted config wins, drain on stop.

The drain settings are read here, without third-party imports, because deploy/probe.py
(standard library and the toolkit only) shares them with the supervisor.
"""

import os
import time
from pathlib import Path

DRAIN_FILE_ENV = "TSBATCH_DRAIN_FILE"  # exists while the pod drains: readiness fails
DRAIN_SECONDS_ENV = "TSBATCH_DRAIN_SECONDS"  # how long a drain lets routed requests finish


def drain_file() -> Path:
    return Path(os.environ.get(DRAIN_FILE_ENV, str(Path.cwd() / "draining")))


def drain_seconds() -> float:
    return float(os.environ.get(DRAIN_SECONDS_ENV, "15"))


def mark_draining(marker: Path) -> float:
    """Create the drain mark (once) and return when draining began (epoch seconds)."""
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{time.time()}\n")
    return marker.stat().st_mtime
