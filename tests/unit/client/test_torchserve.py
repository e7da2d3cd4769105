"""The one TorchServe client, against a scripted server that checks keys as TorchServe 0.12 does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tsbatch.client.auth import KeyFile
from tsbatch.client.torchserve import CallFailed, FixedKeys, KeyRefused, TorchServeClient

DESCRIBED = [{"modelName": "resnet18", "modelVersion": "1.0", "batchSize": 4, "workers": []}]


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime(epoch))


class ScriptedTorchServe(ThreadingHTTPServer):
    """Accepts the management key ``valid``; ``GET /token`` with the API key makes ``fresh`` valid
    and writes it into the key file, as TorchServe does."""

    def __init__(self, key_file: Path, valid: str, registration: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), Answer)
        self.key_file, self.valid, self.registration = key_file, valid, registration
        self.calls: list[tuple[str, str, dict[str, list[str]]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Answer(BaseHTTPRequestHandler):
    server: ScriptedTorchServe

    def answer(self, status: int, body: object) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self) -> None:
        parts = urlsplit(self.path)
        params = parse_qs(parts.query)
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        self.server.calls.append((self.command, parts.path, params))
        if parts.path == "/metrics":
            return self.answer(200, "ts_inference_requests_total 1\n")
        if parts.path == "/token" and key == "api":
            keys = json.loads(self.server.key_file.read_text())
            keys["management"] = {"key": "fresh", "expiration time": iso(time.time() + 3600)}
            self.server.key_file.write_text(json.dumps(keys))
            self.server.valid = "fresh"
            return self.answer(200, {})
        if key != self.server.valid:
            return self.answer(
                400, {"message": "Token Authorization failed. Token either incorrect, expired"}
            )
        if parts.path == "/models" and self.command == "POST" and "url" not in params:
            return self.answer(400 if self.server.registration else 405, {"message": "no url"})
        if parts.path.startswith("/models/resnet18") and self.command == "GET":
            return self.answer(200, DESCRIBED)
        return self.answer(202 if self.command == "POST" else 200, {"status": "ok"})

    do_GET = do_POST = do_PUT = do_DELETE = route

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key_file.json"
    path.write_text(json.dumps({"API": {"key": "api"}, "management": {"key": "old", "expiration time": iso(time.time() + 3)}}))  # fmt: skip
    return path


def serving(key_file: Path, valid: str, registration: bool = True) -> Iterator[ScriptedTorchServe]:
    server = ScriptedTorchServe(key_file, valid, registration)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def client_of(server: ScriptedTorchServe, key_file: Path) -> TorchServeClient:
    url = server.url
    return TorchServeClient({"management": url, "metrics": url}, KeyFile(key_file, url), timeout_s=5)


def test_a_key_that_expires_on_the_way_is_refreshed_and_the_call_sent_again(key_file: Path) -> None:
    # The server no longer takes "old" though the file says it is valid for 3 s more (within the margin).
    for server in serving(key_file, valid="fresh"):
        client = client_of(server, key_file)
        assert client.describe("resnet18")["batchSize"] == 4
        assert [call[1] for call in server.calls] == ["/models/resnet18", "/token", "/models/resnet18"]
        assert json.loads(key_file.read_text())["management"]["key"] == "fresh"


def test_a_key_refused_before_it_expires_is_not_the_servers(key_file: Path) -> None:
    keys = json.loads(key_file.read_text())
    keys["management"]["expiration time"] = iso(time.time() + 3600)
    key_file.write_text(json.dumps(keys))
    for server in serving(key_file, valid="someone-elses"):
        with pytest.raises(KeyRefused) as refused:
            client_of(server, key_file).describe("resnet18")
        assert refused.value.status == 400 and "/token" not in [call[1] for call in server.calls]


def test_the_management_calls_send_what_torchserve_expects(key_file: Path) -> None:
    for server in serving(key_file, valid="old"):
        client = client_of(server, key_file)
        assert client.model_api_enabled()
        client.register("resnet18.v2", "resnet18", 2)
        client.scale("resnet18", 3)
        client.set_default("resnet18", "2.0")
        client.unregister("resnet18", "1.0")
        assert client.describe("resnet18", "1.0", customized=True)["modelVersion"] == "1.0"
        assert "ts_inference_requests_total" in client.metrics_text()
        calls = server.calls[1:]
        assert calls[0] == ("POST", "/models", {
            "url": ["resnet18.v2"], "model_name": ["resnet18"], "initial_workers": ["2"], "synchronous": ["false"],
        })  # fmt: skip
        assert calls[1] == ("PUT", "/models/resnet18", {"min_worker": ["3"], "max_worker": ["3"], "synchronous": ["false"]})  # fmt: skip
        assert calls[2][:2] == ("PUT", "/models/resnet18/2.0/set-default")
        assert calls[3][:2] == ("DELETE", "/models/resnet18/1.0")
        assert calls[4] == ("GET", "/models/resnet18/1.0", {"customized": ["true"]})


def test_registration_off_and_a_fixed_key(key_file: Path) -> None:
    for server in serving(key_file, valid="env-key", registration=False):
        url = server.url
        client = TorchServeClient({"management": url}, FixedKeys({"management": "env-key"}))
        assert not client.model_api_enabled()
        assert client.headers("management") == {"Authorization": "Bearer env-key"}
        with pytest.raises(CallFailed, match="HTTP 400"):
            TorchServeClient({"management": url}, None).describe("resnet18")


def test_a_model_url_for_messages_is_the_one_the_calls_use() -> None:
    client = TorchServeClient({"management": "http://127.0.0.1:8081/"})
    assert client.model_url("resnet18") == "http://127.0.0.1:8081/models/resnet18"
    assert client.model_url("resnet18", "<version>") == "http://127.0.0.1:8081/models/resnet18/<version>"
