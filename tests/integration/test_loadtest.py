"""The SLA-gated load test against a real TorchServe: pass, latency breach, error breach, web UI.

Each run is Locust as a subprocess (as CI runs it), about 10 s of load on the shared
instance serving every model, so the mixed scenario covers both models' payloads and
response schemas.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tsbatch.client.process import TorchServe, free_port
from tsbatch.paths import REPO_ROOT

LOCUST = Path(sys.executable).parent / "locust"
LOCUSTFILE = REPO_ROOT / "loadtest" / "locustfile.py"
CHROMIUM = Path("/usr/bin/chromium")
REPORTS = REPO_ROOT / "reports" / "loadtest"
MIX = "resnet18=1,bert_intent=1"


@pytest.fixture(scope="module")
def server(torchserve: TorchServe) -> TorchServe:
    return torchserve


def locust_command(
    server: TorchServe, *extra: str, users: int = 4, spawn_rate: int = 4, run_time: str = "10s"
) -> list[str]:
    return [
        str(LOCUST),
        "-f", str(LOCUSTFILE),
        "-u", str(users),
        "-r", str(spawn_rate),
        "-t", run_time,
        "--host", server.url("inference"),
        "--key-file", str(server.key_file),
        "--mix", MIX,
        "--only-summary",
        *extra,
    ]  # fmt: skip


def run_headless(
    server: TorchServe, *extra: str, env: dict[str, str] | None = None, **sizes: Any
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*locust_command(server, *extra, **sizes), "--headless"],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=90,
    )
    print(result.stdout[-4000:], result.stderr[-4000:])  # shown when the test fails
    return result


def gate_section(output: str) -> str:
    return output[output.index("SLA gate (profile") :]


def test_cpu_profile_passes_with_mixed_traffic(server: TorchServe, tmp_path: Path) -> None:
    report = tmp_path / "sla.json"
    # 4 users at 2/s: about 1.5 s of ramp-up, then 3 s of --warmup (a fresh server's first
    # batches of each size are slow), both left out of the window
    result = run_headless(
        server,
        "--sla-profile",
        "cpu",
        "--warmup",
        "3",
        "--sla-report",
        str(report),
        spawn_rate=2,
        run_time="12s",
    )
    assert result.returncode == 0, gate_section(result.stdout + result.stderr)
    verdict = json.loads(report.read_text())
    assert verdict["passed"] is True
    measured = {m["model"]: m["measured"] for m in verdict["models"]}
    assert set(measured) == {"resnet18", "bert_intent"}
    for model, figures in measured.items():
        assert figures["requests"] >= 20, model  # both models really got traffic in the window
        assert figures["failures"] == 0, model  # every body matched its schema
    assert "SLA gate: PASS" in result.stdout
    assert 6.0 < verdict["window_s"] < 12 - 3  # run time minus warm-up minus the ramp-up


def test_impossible_latency_target_fails_and_names_figure_and_model(
    server: TorchServe, tmp_path: Path
) -> None:
    generous = {"p50_ms": 60000, "p95_ms": 60000, "max_error_rate": 0.5, "min_throughput_rps": 0.1}
    sla_file = tmp_path / "sla.yaml"
    sla_file.write_text(
        json.dumps(  # JSON is YAML
            {
                "default_profile": "impossible",
                "profiles": {
                    "impossible": {
                        "resnet18": {**generous, "p99_ms": 1},
                        "bert_intent": {**generous, "p99_ms": 60000},
                    }
                },
            }
        )
    )
    result = run_headless(server, "--sla-file", str(sla_file), "--mode", "open", "--user-rate", "4")
    assert result.returncode == 1
    gate = gate_section(result.stdout)
    assert "breached: resnet18: p99_ms = " in gate and "target <= 1.0 ms" in gate
    assert "breached: bert_intent" not in gate  # the other model met its (generous) targets


def test_wrong_token_fails_on_the_error_rate(server: TorchServe) -> None:
    result = run_headless(server, "--think-time", "0.05", env={"TS_INFERENCE_TOKEN": "not-the-key"})
    assert result.returncode == 1
    gate = gate_section(result.stdout)
    assert "breached: resnet18: max_error_rate = 100.00%" in gate
    assert "breached: bert_intent: max_error_rate = 100.00%" in gate
    assert "InvalidKeyException" in result.stderr  # Locust's error report (stderr) says why


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (scripts/ensure_chromium.sh installs it)"
)
def test_web_ui_shows_the_live_sla_table(server: TorchServe, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = locust_command(
        server,
        "--autostart",
        "--autoquit",
        "1",
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        run_time="16s",
    )
    with subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as locust:
        try:
            data = wait_for_measurements(f"{base}/sla/data", timeout=30)
            assert data["status"] == "PASS", data
            figures = {(row["model"], row["figure"]) for row in data["rows"]}
            assert ("resnet18", "p99 latency (ms)") in figures
            assert ("bert_intent", "throughput (req/s)") in figures
            # Locust's own stats poll carries the same rows for the "SLA gate" tab
            stats = requests.get(f"{base}/stats/requests", timeout=5).json()
            assert stats["extended_stats"][0]["key"] == "sla"
            screenshot = screenshot_page(f"{base}/?tab=sla", tmp_path)
            assert screenshot.stat().st_size > 20_000
        finally:
            output, _ = locust.communicate(timeout=60)
            print(output[-4000:])
    assert locust.returncode == 0
    assert "SLA gate: PASS" in output


def wait_for_measurements(url: str, timeout: float) -> dict:
    """Poll /sla/data until the ramp-up is over and a few seconds are measured."""
    deadline = time.monotonic() + timeout
    data: dict = {}
    while time.monotonic() < deadline:
        try:
            data = requests.get(url, timeout=5).json()
            if data["status"] != "WAIT" and data["window_s"] >= 4:
                return data
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no measurements at {url} after {timeout} s: {data}")


def screenshot_page(url: str, tmp_path: Path) -> Path:
    """Headless Chromium renders the web UI's SLA tab into reports/loadtest/ (not committed)."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    target = REPORTS / "sla_tab.png"
    target.unlink(missing_ok=True)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    command = [
        str(CHROMIUM),
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--screenshot={target}", "--window-size=1400,1000",
        "--virtual-time-budget=4000", url,
    ]  # fmt: skip
    subprocess.run(command, capture_output=True, timeout=60, check=True)
    shutil.rmtree(profile, ignore_errors=True)
    assert target.exists(), "chromium wrote no screenshot"
    return target
