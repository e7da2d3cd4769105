"""Archives the toolkit did not build, as a new user brings them: gate, then tune, with their own requests.

Two archives, served by a plain TorchServe (its own minimal config.properties, token auth on):

- ``stock_mobilenet``: TorchServe's stock ``image_classifier`` handler around a scripted
  mobilenet_v3_small (random weights, 10 classes) and an index_to_name.json, batchSize 4 /
  maxBatchDelay 20 in its model-config.yaml; it answers an image with its top-5 labels;
- ``json_scorer``: a handler file of the test's own that reads a JSON body and answers JSON.

The load test reaches them with ``--model``/``--mix`` and ``--requests`` (a folder of JPEG/PNG
files, a .jsonl), the SLA from the command line, seconds of load each.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests as http
import torch
import torchvision
import yaml
from PIL import Image

from tests.integration.test_loadtest import LOCUST, LOCUSTFILE, TSBATCH_LOADTEST, gate_section
from tsbatch.analysis.tune.mar import read_mar
from tsbatch.analysis.tune.report import read_points_csv
from tsbatch.config.properties import model_settings, read_properties
from tsbatch.paths import REPO_ROOT
from tsbatch.server.ports import free_ports, worker_port_base
from tsbatch.server.process import TorchServe

ARCHIVER = Path(sys.executable).parent / "torch-model-archiver"
MOBILENET, SCORER = "stock_mobilenet", "json_scorer"
# Ceilings this machine meets whatever else runs on it: the gate's machinery is under test.
MET = ("--p50-ms", "60000", "--p95-ms", "60000", "--p99-ms", "60000", "--min-throughput-rps", "0.1")
# One intra-op thread per worker, as the toolkit's own workers run (torchThreads 1): the stock
# handler would otherwise take every core of a machine it shares with the load generator.
ONE_THREAD = ("OMP_NUM_THREADS", "1")
TOP5_SCHEMA = {"type": "object", "minProperties": 5, "additionalProperties": {"type": "number"}}
SCORE_SCHEMA = {
    "type": "object",
    "required": ["sum", "count"],
    "properties": {"sum": {"type": "number"}, "count": {"type": "integer", "minimum": 1}},
}
SCORER_HANDLER = '''"""Reads {"values": [numbers]} and answers {"sum": ..., "count": ...}, one answer per request."""
import json

import torch


def handle(data, context):
    if data is None:  # TorchServe's load-time call
        return None
    answers = []
    for row in data:
        body = row.get("body") or row.get("data")
        if isinstance(body, (bytes, bytearray)):
            body = json.loads(body)
        values = torch.tensor(body["values"], dtype=torch.float64)
        answers.append({"sum": float(values.sum()), "count": int(values.numel())})
    return answers
'''


def archive(work: Path, name: str, handler: str, *extra: str) -> Path:
    """torch-model-archiver as the user would run it, batchSize 4 / maxBatchDelay 20 in the config."""
    config = work / f"{name}-config.yaml"
    config.write_text(yaml.safe_dump({"batchSize": 4, "maxBatchDelay": 20, "minWorkers": 1, "maxWorkers": 1}))
    store = work / "model-store"
    store.mkdir(exist_ok=True)
    command = [str(ARCHIVER), "--model-name", name, "--version", "1.0", "--handler", handler,
               "--config-file", str(config), "--export-path", str(store), "--force", *extra]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "TMPDIR": str(work)})
    return store / f"{name}.mar"


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("your-archives")
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10).eval()
    torch.jit.script(model).save(str(work / "mobilenet.pt"))
    labels = work / "index_to_name.json"
    labels.write_text(json.dumps({str(i): f"class_{i}" for i in range(10)}))
    handler = work / "json_scorer.py"
    handler.write_text(SCORER_HANDLER)
    image_files = ("--serialized-file", str(work / "mobilenet.pt"), "--extra-files", str(labels))
    return {
        MOBILENET: archive(work, MOBILENET, "image_classifier", *image_files),
        SCORER: archive(work, SCORER, str(handler)),
    }


@pytest.fixture(scope="module")
def plain_server(archives: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[TorchServe]:
    """``torchserve --start`` with nothing of the toolkit's config: the user's own server."""
    run_dir = tmp_path_factory.mktemp("plain-torchserve")
    inference, management, metrics, grpc, grpc_management = free_ports(5)
    properties = run_dir / "config.properties"
    properties.write_text(
        f"inference_address=http://127.0.0.1:{inference}\nmanagement_address=http://127.0.0.1:{management}\n"
        f"metrics_address=http://127.0.0.1:{metrics}\ngrpc_inference_port={grpc}\n"
        f"grpc_management_port={grpc_management}\ninitial_worker_port={worker_port_base()}\n"
        f"metrics_mode=prometheus\nload_models={MOBILENET}.mar,{SCORER}.mar\n"
    )
    server = TorchServe(run_dir=run_dir, properties_path=properties, model_store=archives[MOBILENET].parent)
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv(*ONE_THREAD)
            server.start([MOBILENET, SCORER], timeout=240)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def pictures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's folder of request bodies: a few JPEG and PNG photos of different sizes."""
    folder = tmp_path_factory.mktemp("pictures")
    for index, (width, height) in enumerate([(320, 240), (640, 480), (224, 224), (500, 375)]):
        image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
        image.save(folder / f"photo_{index}.{'jpg' if index % 2 else 'png'}")
    return folder


@pytest.fixture(scope="module")
def scorer_requests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's .jsonl: JSON bodies as they are, wrapped, and as text with a JSON type."""
    path = tmp_path_factory.mktemp("jsonl") / "requests.jsonl"
    lines = [{"values": [1, 2, 3]}, {"json": {"values": [4.5]}}, {"text": '{"values": [0, 1]}', "content_type": "application/json"}]  # fmt: skip
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def loadtest(server: TorchServe, *args: str, run_time: str = "10s") -> subprocess.CompletedProcess[str]:
    command = [
        *TSBATCH_LOADTEST, "-u", "4", "-r", "4", "-t", run_time,
        "--host", server.url("inference"), "--key-file", str(server.key_file),
        "--metrics-url", server.url("metrics"), "--management-url", server.url("management"),
        "--server-scrape-interval", "1", "--warmup", "2", "--only-summary", *args,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    print(result.stdout[-4000:], result.stderr[-4000:])  # shown when the test fails
    return result


def write_json(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_the_stock_image_classifier_is_gated_on_the_users_pictures(
    plain_server: TorchServe, pictures: Path, tmp_path: Path
) -> None:
    report = tmp_path / "sla.json"
    schema = write_json(tmp_path / "top5.json", TOP5_SCHEMA)
    result = loadtest(plain_server, "--model", MOBILENET, "--requests", str(pictures),
                      "--answer-schema", str(schema), "--sla-report", str(report), *MET)  # fmt: skip
    assert result.returncode == 0, gate_section(result.stdout)
    assert "SLA gate: PASS" in result.stdout
    verdict = json.loads(report.read_text())
    (entry,) = verdict["models"]
    assert entry["model"] == MOBILENET and entry["profile"] == "command line"  # no entry in the file
    assert entry["measured"]["requests"] >= 10 and entry["measured"]["failures"] == 0
    assert verdict["server_view"]["metrics_url"] == plain_server.url("metrics")

    broken = loadtest(  # a 1 ms p99 breaks on the first requests: seconds of load suffice
        plain_server, "--model", MOBILENET, "--requests", str(pictures), *MET, "--p99-ms", "1", run_time="5s"
    )
    assert broken.returncode == 1
    gate = gate_section(broken.stdout)
    assert f"breached: {MOBILENET}: p99_ms = " in gate and "target <= 1.0 ms" in gate


def test_a_model_without_requests_stops_at_start_naming_the_option(plain_server: TorchServe) -> None:
    result = loadtest(plain_server, "--model", MOBILENET, *MET)
    assert result.returncode == 2
    assert f"no requests for ['{MOBILENET}']: give each its request bodies with --requests MODEL=PATH" in (
        result.stdout + result.stderr
    )


def test_two_user_models_in_one_mix_and_an_answer_schema_that_fails(
    plain_server: TorchServe, pictures: Path, scorer_requests: Path, tmp_path: Path
) -> None:
    report = tmp_path / "sla.json"
    mixed = loadtest(plain_server, "--mix", f"{MOBILENET}=1,{SCORER}=1", "--requests", f"{MOBILENET}={pictures}",
                     "--requests", f"{SCORER}={scorer_requests}", "--sla-report", str(report), *MET)  # fmt: skip
    assert mixed.returncode == 0, gate_section(mixed.stdout)
    measured = {entry["model"]: entry["measured"] for entry in json.loads(report.read_text())["models"]}
    assert set(measured) == {MOBILENET, SCORER}
    assert all(figures["requests"] >= 5 and figures["failures"] == 0 for figures in measured.values())

    wrong = write_json(tmp_path / "wrong.json", {**SCORE_SCHEMA, "required": ["mean"]})
    judged = loadtest(plain_server, "--model", SCORER, "--requests", str(scorer_requests),
                      "--answer-schema", str(wrong), *MET, run_time="6s")  # fmt: skip
    assert judged.returncode == 1
    assert f"breached: {SCORER}: max_error_rate = 100.00%" in gate_section(judged.stdout)
    assert "'mean' is a required property" in judged.stderr  # Locust's error report says why


def test_the_web_ui_takes_the_requests_in_its_start_form(plain_server: TorchServe, pictures: Path) -> None:
    """Started without --requests (a configuration error it shows), given them in the form."""
    port = free_ports(1)[0]
    base = f"http://127.0.0.1:{port}"
    command = [
        str(LOCUST), "-f", str(LOCUSTFILE), "--web-host", "127.0.0.1", "--web-port", str(port),
        "--host", plain_server.url("inference"), "--key-file", str(plain_server.key_file),
        "--metrics-url", plain_server.url("metrics"), "--management-url", plain_server.url("management"),
        "--model", MOBILENET, *MET,
    ]  # fmt: skip
    with subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as ui:
        try:
            before = wait_for(f"{base}/sla/data", lambda data: data["status"] == "CONFIG ERROR", timeout=30)
            assert "--requests MODEL=PATH" in before["error"]
            form = {"user_count": "2", "spawn_rate": "2", "host": plain_server.url("inference"),
                    "run_time": "20s", "requests": str(pictures)}  # fmt: skip
            assert http.post(f"{base}/swarm", data=form, timeout=10).json()["success"] is True
            data = wait_for(f"{base}/sla/data", lambda data: data["status"] == "PASS", timeout=40)
            assert data["requests"][MOBILENET] > 0 and data["profile"] == "command line"
            assert (MOBILENET, "p99 latency (ms)") in {(row["model"], row["figure"]) for row in data["rows"]}
        finally:
            ui.terminate()  # the web UI runs until told to quit; SIGTERM is Locust's clean shutdown
            output, _ = ui.communicate(timeout=60)
            print(output[-4000:])


def wait_for(url: str, done: Callable[[dict], bool], timeout: float) -> dict:
    """Poll a JSON page until ``done`` says so."""
    deadline = time.monotonic() + timeout
    data: dict = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(http.RequestException, ValueError):
            data = http.get(url, timeout=5).json()
            if done(data):
                return data
        time.sleep(0.5)
    raise AssertionError(f"{url} not ready after {timeout} s: {data}")


@pytest.mark.parametrize(
    ("model", "requests_fixture"), [(MOBILENET, "pictures"), (SCORER, "scorer_requests")]
)
def test_tune_searches_the_archive_and_writes_its_models_entry(
    archives: dict[str, Path],
    model: str,
    requests_fixture: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    requests = request.getfixturevalue(requests_fixture)
    out = tmp_path / "tune"
    schema = write_json(tmp_path / "schema.json", TOP5_SCHEMA if model == MOBILENET else SCORE_SCHEMA)
    command = [sys.executable, "-m", "tsbatch", "tune", "--mar", str(archives[model]), "--requests", str(requests),
               "--answer-schema", str(schema), "--quick", "--out", str(out), "--max-error-rate", "0.05", *MET]  # fmt: skip
    env = {**os.environ, ONE_THREAD[0]: ONE_THREAD[1]}
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    print(result.stdout[-4000:], result.stderr[-3000:])
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]

    points = read_points_csv(out / f"{model}.csv")
    assert [p.settings.batch_size for p in points] == [1, 4, 8][: len(points)] and len(points) >= 2
    assert all(p.failure is None and p.requests > 5 and p.error_rate == 0 for p in points)
    winner = next(p for p in points if f"{p.label} wins" in (out / "summary.md").read_text())
    entry = model_settings(read_properties(out / "recommended.properties"))
    assert list(entry) == [model]  # the archive's model alone, named by its archive file
    assert entry[model]["marName"] == f"{model}.mar"
    assert (entry[model]["batchSize"], entry[model]["maxBatchDelay"]) == (
        winner.settings.batch_size,
        winner.settings.max_batch_delay_ms,
    )
    assert "recommended models= entry" in result.stdout
    packaged = read_mar(out / f"{model}.mar")  # the winner, its model-config.yaml rewritten
    assert packaged.settings.batch_size == winner.settings.batch_size
