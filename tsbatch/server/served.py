"""What each model's workers serve and how much memory they hold, asked of the server.

The decision comes from the workers themselves (the handler answers TorchServe's
``?customized=true`` describe call with it), so what is printed is what runs, not what the
build expected. Memory is each worker process's resident set: operators size pods and
workers per node by it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from tsbatch.client.torchserve import TorchServeClient


class ManagedServer(Protocol):
    """The part of ``tsbatch.server.process.TorchServe`` used here."""

    @property
    def client(self) -> TorchServeClient: ...


def served_decision(server: ManagedServer, model: str) -> dict[str, Any]:
    """One worker's own account of what it serves (runtime, precision, file, load time, why)."""
    description = server.client.describe(model, customized=True)
    metadata = description.get("customizedMetadata", "{}")
    return json.loads(metadata) if isinstance(metadata, str) else dict(metadata)


def process_rss_mb(pid: int, proc: Path = Path("/proc")) -> float | None:
    """Resident memory of a process in MiB (None when it is not on this machine)."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def worker_rss_mb(server: ManagedServer, model: str) -> list[float]:
    """Resident memory of each READY worker of ``model``, in MiB, read from /proc by the
    pid the management API names (the frontend's own ``memoryUsage`` where that fails)."""
    sizes = []
    for worker in server.client.describe(model).get("workers", []):
        if worker.get("status") != "READY":
            continue
        rss = process_rss_mb(int(worker.get("pid") or 0))
        if rss is None and worker.get("memoryUsage"):
            rss = float(worker["memoryUsage"]) / 2**20
        if rss is not None:
            sizes.append(round(rss, 1))
    return sizes


def serving_summary(server: ManagedServer, models: list[str]) -> list[str]:
    """One line per model: what its workers serve, why, their cold load and memory."""
    lines = []
    for model in models:
        decision = served_decision(server, model)
        rss = ", ".join(f"{size:.0f}" for size in worker_rss_mb(server, model)) or "?"
        lines.append(
            f"  {model}: {decision.get('runtime')} {decision.get('precision')} from {decision.get('file')} "
            f"(cold load {decision.get('load_seconds', 0):.1f}s; worker RSS {rss} MiB)"
        )
        lines += [f"      why {reason['code']}: {reason['detail']}" for reason in decision.get("why", [])]
    return lines
