"""A real Prometheus scrapes a real TorchServe: batching shows up in PromQL, and every query
of the Grafana dashboard and the autoscaling rules evaluates against the real series.

Prometheus comes from Debian's package (scripts/ensure_prometheus.sh installs it); without
the binary the test skips and says how to install it.
"""

from __future__ import annotations

import concurrent.futures
import math
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.conftest import image_bytes
from tests.integration.support import record
from tests.unit.deploy.readers import adapter_rules, all_exprs, dashboard, promql_metric_names
from tsbatch.archive.package import private_store
from tsbatch.paths import REPO_ROOT
from tsbatch.server.ports import free_port

pytestmark = pytest.mark.slow

MODEL = "resnet18"
CLIENTS = 16
REQUESTS_PER_CLIENT = 25
GRAFANA_VARIABLES = {
    "$namespace": ".*",
    "$pod": ".*",
    "$model": MODEL,
    "$__rate_interval": "1m",
    "$__range": "5m",
}


@contextmanager
def running_prometheus(scrape_target: str, work_dir: Path) -> Iterator[str]:
    """Prometheus on a free loopback port, scraping ``scrape_target`` every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("Prometheus is not installed: run `bash scripts/ensure_prometheus.sh` (root + apt-get)")
    config = yaml.safe_load((REPO_ROOT / "observability" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["scrape_configs"][0]["static_configs"][0]["targets"] = [scrape_target]
    work_dir.mkdir(parents=True, exist_ok=True)
    config_path = work_dir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (work_dir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={work_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (work_dir / "prometheus.log").read_text()
            try:
                if requests.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not become ready in 30 s"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    response = requests.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
    body = response.json()
    assert body["status"] == "success", f"{expr}: {body.get('error')}"
    return body["data"]["result"]


def scalar(prometheus: str, expr: str) -> float | None:
    result = query(prometheus, expr)
    return float(result[0]["value"][1]) if result else None


def wait_for(prometheus: str, expr: str, timeout: float = 20) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = scalar(prometheus, expr)
        if value is not None and not math.isnan(value):
            return value
        time.sleep(0.5)
    raise AssertionError(f"no value for {expr} after {timeout:.0f} s")


def drive_concurrent_load(server: Any) -> int:
    body = image_bytes()

    def client(_: int) -> list[int]:
        session = requests.Session()
        headers = {**server.client.headers("inference"), "Content-Type": "image/png"}
        url = f"{server.url('inference')}/predictions/{MODEL}"
        return [
            session.post(url, data=body, headers=headers, timeout=60).status_code
            for _ in range(REQUESTS_PER_CLIENT)
        ]

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        statuses = [status for statuses in pool.map(client, range(CLIENTS)) for status in statuses]
    assert set(statuses) == {200}
    return len(statuses)


def substitute(expr: str, values: dict[str, str]) -> str:
    for name, value in sorted(values.items(), key=lambda item: -len(item[0])):
        expr = expr.replace(name, value)
    return expr


def test_real_prometheus_sees_batching_and_evaluates_every_dashboard_query(
    start_server, model_store, tmp_path
) -> None:
    properties, store = private_store(tmp_path / "config", [MODEL], changes={MODEL: {"maxBatchDelay": 50}})
    server = start_server(store, [MODEL], source=properties)
    metrics_target = server.url("metrics").removeprefix("http://")
    with running_prometheus(metrics_target, tmp_path / "prometheus") as prometheus:
        wait_for(prometheus, 'up{job="torchserve"} == 1')
        # One request first, so every series exists and has a sample before the load:
        # increase() counts only what happens between samples.
        assert server.client.predict(MODEL, image_bytes(), "image/png").status_code == 200
        wait_for(prometheus, f'BatchesTotal{{ModelName="{MODEL}"}} > 0')
        wait_for(prometheus, f'ts_inference_requests_total{{model_name="{MODEL}"}} > 0')
        sent = drive_concurrent_load(server)
        mean_batch = wait_for(
            prometheus,
            f'sum(increase(BatchedRequestsTotal{{ModelName="{MODEL}"}}[1m]))'
            f' / sum(increase(BatchesTotal{{ModelName="{MODEL}"}}[1m]))',
        )
        time.sleep(2)  # two more scrapes: the tail of the load is in every series
        seen = scalar(prometheus, f'sum(increase(ts_inference_requests_total{{model_name="{MODEL}"}}[1m]))')
        p99_ms = scalar(
            prometheus,
            f'1000 * histogram_quantile(0.99, sum by (le) (rate(RequestHandlerSeconds_bucket{{ModelName="{MODEL}"}}[1m])))',
        )
        print(
            f"\n[prometheus] {sent} requests from {CLIENTS} clients, maxBatchDelay 50 ms: mean batch size "
            f"{mean_batch:.2f} (PromQL), requests seen {seen:.0f}, handler p99 {p99_ms:.1f} ms"
        )
        record(
            "prometheus",
            requests=sent,
            clients=CLIENTS,
            mean_batch_size=round(mean_batch, 2),
            handler_p99_ms=round(p99_ms or 0, 1),
        )
        assert mean_batch > 1, "requests were not batched"
        assert seen is not None and seen > 0.8 * sent, "Prometheus did not see the load"
        assert p99_ms is not None and 0 < p99_ms < 10_000

        present = {name for name in _all_metric_names() if query(prometheus, f'count({{__name__="{name}"}})')}
        for expr in all_exprs(dashboard()):
            concrete = substitute(expr, GRAFANA_VARIABLES)
            result = query(prometheus, concrete)  # every query must at least parse and run
            if promql_metric_names(expr) <= present:
                assert result, f"dashboard query returned nothing although its series exist: {concrete}"

        for rule in adapter_rules():
            concrete = (
                rule["metricsQuery"]
                .replace("<<.GroupBy>>", "job")
                .replace("<<.LabelMatchers>>", 'job="torchserve"')
            )
            values = [float(sample["value"][1]) for sample in query(prometheus, concrete)]
            assert values and all(v >= 0 and not math.isnan(v) for v in values), concrete
            print(f"[prometheus] HPA metric {rule['name']['as']} = {values[0]:.2f}")


def _all_metric_names() -> set[str]:
    return {name for expr in all_exprs(dashboard()) for name in promql_metric_names(expr)}
