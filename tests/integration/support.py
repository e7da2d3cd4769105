"""Helpers shared by the integration tests that load a server and keep what they measured."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from batchkit.tolerance import tolerance
from tsbatch.client.load import BackgroundLoad, LoadDriver
from tsbatch.config.properties import ADDRESS_KEYS
from tsbatch.paths import REPORTS_DIR
from tsbatch.server.ports import free_ports, worker_port_base
from tsbatch.server.served import served_decision

REPORTS = REPORTS_DIR / "production"


def record(name: str, **figures: Any) -> None:
    """Keep a test's measured figures: printed (see them with -s) and written to
    reports/production/<name>.json, so CI keeps them even when output is captured."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{name}.json").write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


def background_load(
    server: Any,
    model: str,
    bodies: Sequence[bytes],
    clients: int,
    content_type: str | Sequence[str] = "image/png",
    timeout: float = 90,
) -> BackgroundLoad:
    """``clients`` connections, each posting its next body as soon as the last answer came,
    until the ``with`` block ends. Every request's record is kept, failures included."""
    driver = LoadDriver(
        f"{server.url('inference')}/predictions/{model}",
        bodies,
        content_types=content_type,
        headers=server.client.headers("inference"),
        request_timeout_s=timeout,
    )
    return BackgroundLoad(driver, clients)


def private_port_entries() -> dict[str, str]:
    """config.properties entries that put one instance on free loopback ports (HTTP APIs,
    gRPC, worker sockets), as ``start_instance`` does, for tests that start TorchServe
    their own way."""
    *api_ports, grpc_inference, grpc_management = free_ports(len(ADDRESS_KEYS) + 2)
    entries = {
        key: f"http://127.0.0.1:{port}" for key, port in zip(ADDRESS_KEYS.values(), api_ports, strict=True)
    }
    entries.update(
        grpc_inference_port=str(grpc_inference),
        grpc_management_port=str(grpc_management),
        initial_worker_port=str(worker_port_base()),
    )
    return entries


def served_tolerance(server: Any, model: str) -> float:
    """How far two answers of ``model``'s worker may differ: the tolerance of the precision
    it serves (``batchkit.tolerance``, the table the handler's build and load check use)."""
    return tolerance(served_decision(server, model)["precision"])


def json_documents(text: str) -> list[Any]:
    """The JSON documents printed one after another (curl's answers, unseparated)."""
    documents, decoder, position = [], json.JSONDecoder(), 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
    return documents
