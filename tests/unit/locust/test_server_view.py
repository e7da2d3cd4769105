"""The server view's scrapes over HTTP: counters and workers per model, and the reason when it cannot."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tsbatch.locust.server_view import ServerEndpoints, ServerView
from tsbatch.server.ports import free_port
from tsbatch.sla.gate import Window

DESCRIPTION = {"batchSize": 8, "maxBatchDelay": 10, "minWorkers": 1, "maxWorkers": 1}


def metrics(batches: int, requests: int) -> str:
    return (
        f'BatchesTotal{{ModelName="resnet18",Level="Model",Hostname="h",}} {batches}.0\n'
        f'BatchedRequestsTotal{{ModelName="resnet18",Level="Model",Hostname="h",}} {requests}.0\n'
        f'ts_queue_latency_microseconds{{model_name="resnet18",model_version="default",}} {requests * 4000}\n'
        f'ts_inference_requests_total{{model_name="resnet18",model_version="default",}} {requests}.0\n'
    )


class ScriptedTorchServe(ThreadingHTTPServer):
    """Answers ``/metrics`` with the next scripted text and ``/models/<m>`` (management key
    ``m-key``) with the next scripted worker pid: what TorchServe's two endpoints return."""

    def __init__(self, texts: list[str], pids: list[int]) -> None:
        super().__init__(("127.0.0.1", 0), ScriptedHandler)
        self.texts, self.pids = texts, pids

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ScriptedHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server = self.server
        assert isinstance(server, ScriptedTorchServe)
        if self.path == "/metrics":
            body, kind = server.texts.pop(0).encode(), "text/plain"
        elif self.headers.get("Authorization") != "Bearer m-key":
            self.send_error(400, "InvalidKeyException")
            return
        else:
            workers = [{"pid": server.pids.pop(0)}]
            body, kind = json.dumps([{**DESCRIPTION, "workers": workers}]).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        """Quiet: the test asserts on what the view kept."""


@pytest.fixture
def torchserve() -> Iterator[ScriptedTorchServe]:
    server = ScriptedTorchServe([metrics(0, 0), metrics(10, 30), metrics(30, 90)], [7, 7, 9])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_scrapes_give_window_figures_settings_and_restarts(torchserve: ScriptedTorchServe) -> None:
    view = ServerView(ServerEndpoints(torchserve.url, torchserve.url, "m-key", "test"), ["resnet18"])
    for at in (1.0, 3.0, 5.0):
        assert view.scrape(now=at)
    window = Window(1.0, 5.0)
    figures = view.figures(window)["resnet18"]
    assert figures is not None
    assert figures.mean_batch_size == 3.0 and figures.fill_ratio == pytest.approx(3 / 8)
    assert figures.queue_ms == pytest.approx(4.0)
    assert figures.worker_restarts == 1  # pid 7 became 9
    assert view.unavailable_reason(window) is None
    assert view.summary(window)["available"] is True and view.summary(window)["scrapes"] == 3


def test_a_wrong_management_key_keeps_the_metrics_and_says_why(torchserve: ScriptedTorchServe) -> None:
    view = ServerView(ServerEndpoints(torchserve.url, torchserve.url, "wrong", "key_file.json"), ["resnet18"])
    view.scrape(now=1.0)
    view.scrape(now=3.0)
    figures = view.figures(Window(0.0, 4.0))["resnet18"]
    assert figures is not None and figures.mean_batch_size == 3.0
    assert figures.settings is None and figures.worker_restarts is None
    assert view.management_error is not None and "HTTP 400" in view.management_error


def test_an_unreachable_endpoint_is_named_and_nothing_is_kept() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    view = ServerView(ServerEndpoints(url, url), ["resnet18"])
    assert not view.scrape()
    reason = view.unavailable_reason(Window(0.0, 10.0))
    assert reason == f"metrics endpoint {url}/metrics unreachable (ConnectionError)"
    assert view.figures(Window(0.0, 10.0)) == {"resnet18": None}
    assert view.summary(Window(0.0, 10.0))["available"] is False
