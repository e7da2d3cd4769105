"""The README's commands, run as written: TorchServe started the plain way
(`torchserve --start --ts-config config.properties` from a directory laid out like the
repository root after `make archive`), then the "Calling the models" curl examples.

The one change to what a user runs: the copy of config.properties in that directory has
private loopback ports (HTTP APIs, gRPC, worker sockets) so the test runs beside other
servers, and the curl lines get those ports and this server's key file. Everything else
(the commands, the relative model_store and metrics_config) is the repository's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import torch

from image_serving.images import decode_pixels, model_batch
from tests.integration.support import json_documents, private_port_entries
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import load_manifest
from tsbatch.config.properties import replace_entry
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT
from tsbatch.server.process import TorchServe

pytestmark = pytest.mark.slow

README = REPO_ROOT / "README.md"
MODELS = ["resnet18", "bert_intent"]


def promised_answer(picture: Path) -> tuple[str, float]:
    """The label the docs promise for the README's digit and its least probability: "7",
    confidently, from the offline digits build; from an ImageNet build, the label its own
    TorchScript gives the same file in process (a digit means little to ImageNet classes)."""
    build = load_manifest().model("resnet18").artifact_dir
    info = artifacts.read_json(build / artifacts.BUILD_INFO_FILE)
    if info.get("weights_details", {}).get("dataset") == "sklearn.datasets.load_digits":
        return "7", 0.9  # docs/api.md shows 0.98
    handler = artifacts.read_json(build / artifacts.HANDLER_CONFIG_FILE)
    labels = artifacts.read_labels(build / artifacts.LABELS_FILE)
    fields = ("resize_size", "crop_size", "max_image_pixels", "max_body_bytes")
    pixels = decode_pixels(picture.read_bytes(), **{key: handler[key] for key in fields})
    model = torch.jit.load(str(build / artifacts.MODEL_FILE))
    with torch.inference_mode():
        index = int(
            model(model_batch([pixels], handler["mean"], handler["std"], torch.device("cpu"))).argmax()
        )
    return labels[index], 0.0


def bash_block(after_heading: str) -> list[str]:
    """The commands of the first ```bash block after a README heading, continuations joined."""
    text = README.read_text()
    section = text[text.index(after_heading) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"no bash block after {after_heading!r}"
    return [line.strip() for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def plain_torchserve(tmp_path_factory: pytest.TempPathFactory, model_store: Path) -> Iterator[TorchServe]:
    root = tmp_path_factory.mktemp("repo-root")
    text = DEFAULT_PROPERTIES.read_text()
    for key, value in private_port_entries().items():
        text = replace_entry(text, key, f"{key}={value}\n")
    (root / "config.properties").write_text(text)
    for name in ("metrics.yaml", ".venv", "build"):  # build/plugins: plugins_path
        (root / name).symlink_to(REPO_ROOT / name)
    (root / "model-store").symlink_to(model_store)
    commands = bash_block("### Plain TorchServe")
    start = next(c for c in commands if c.startswith("torchserve --start"))
    activate = next(c for c in commands if c.startswith("source "))
    env = {**os.environ, "TMPDIR": str(root)}  # TorchServe's pid file: this instance's own
    launcher = subprocess.Popen(
        ["bash", "-c", f"{activate} && {start}"], cwd=root, env=env, start_new_session=True
    )
    server = TorchServe(run_dir=root, properties_path=root / "config.properties", model_store=model_store)
    try:
        server.wait_ready(MODELS, timeout=240)
        yield server
    finally:
        stop = next(c for c in commands if c.startswith("torchserve --stop"))
        subprocess.run(["bash", "-c", f"{activate} && {stop}"], cwd=root, env=env, timeout=120)
        launcher.wait(timeout=30)
        for process in _java_processes(root):
            os.kill(process, signal.SIGKILL)


def _java_processes(root: Path) -> list[int]:
    """Frontends started from ``root`` still running (none once `torchserve --stop` worked)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.readlink(proc / "cwd") == str(root) and b"java" in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def test_plain_torchserve_serves_both_models(plain_torchserve: TorchServe) -> None:
    for model in MODELS:
        description = plain_torchserve.client.describe(model)
        assert any(worker["status"] == "READY" for worker in description["workers"]), model
    assert (plain_torchserve.run_dir / "key_file.json").exists(), "token auth stays on"
    # The frontend plugin plugins_path names (built by `make archive`) answers here too.
    base, headers = plain_torchserve.url("inference"), plain_torchserve.client.headers("inference")
    ready = requests.get(f"{base}/v2/health/ready", headers=headers, timeout=30)
    assert ready.status_code == 200 and ready.json() == {"ready": True}, ready.text
    metadata = requests.get(f"{base}/v2/models/resnet18", headers=headers, timeout=30).json()
    assert metadata["inputs"] == [{"name": "image", "datatype": "BYTES", "shape": [-1, 1]}]


def test_readme_curl_examples_answer(plain_torchserve: TorchServe) -> None:
    port = plain_torchserve.url("inference").rsplit(":", 1)[1]
    script = "\n".join(bash_block("## Calling the models"))
    script = script.replace("127.0.0.1:8080", f"127.0.0.1:{port}").replace(
        ".serve/key_file.json", "key_file.json"
    )
    assert script.count("curl ") >= 4
    result = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=plain_torchserve.run_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answers = json_documents(result.stdout)
    assert len(answers) == script.count("curl "), result.stdout
    for answer in answers:
        assert "error" not in answer, answer
    assert [a["model"] for a in answers] == ["resnet18"] * 3 + ["bert_intent"]
    assert len({a["predictions"][0]["label"] for a in answers[:3]}) == 1, "one image, three ways, one answer"
    label, least_probability = promised_answer(plain_torchserve.run_dir / "digit.png")
    top = answers[0]["predictions"][0]
    assert top["label"] == label and top["probability"] >= least_probability, answers[0]
    assert answers[3]["intent"] == "report_lost_card" and "top_k" in answers[3], answers[3]
