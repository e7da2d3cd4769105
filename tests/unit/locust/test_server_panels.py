"""The server section's rows and charts, from a state with samples and scrapes (no HTTP)."""

from __future__ import annotations

from tsbatch.locust.options import RunConfig
from tsbatch.locust.recorder import SampleRecorder
from tsbatch.locust.server_panels import console_lines, latency_points, model_charts, server_rows
from tsbatch.locust.server_view import ServerEndpoints, ServerView
from tsbatch.locust.state import LoadTestState
from tsbatch.settings.batch import BatchSettings
from tsbatch.sla.gate import Sample, Window
from tsbatch.sla.profiles import Sla
from tsbatch.sla.server import ServerSnapshot

SLA = Sla("resnet18", "test", p50_ms=20, p95_ms=40, p99_ms=60, max_error_rate=0.02, min_throughput_rps=5)


def scraped_state(unreachable: str | None = None) -> LoadTestState:
    """resnet18 for 10 s: 10 requests a second, 20-29 ms; scrapes every 2 s, batches of 2.5."""
    recorder = SampleRecorder(clock=lambda: 110.0)
    recorder.ramp_up_done(when=102.0)
    for i in range(100):
        recorder.record("resnet18", 100.0 + i * 0.1, 20.0 + i % 10, True)
    view = ServerView(ServerEndpoints("http://m", "http://g"), ["resnet18"])
    if unreachable:
        view.error = unreachable
    else:
        view.snapshots["resnet18"] = [
            ServerSnapshot(
                100.0 + t,
                {"BatchesTotal": 8.0 * t, "BatchedRequestsTotal": 20.0 * t, "ShedRequestsTotal": 1.0 * t},
                frozenset({7}),
            )
            for t in range(0, 12, 2)
        ]
        view.settings["resnet18"] = BatchSettings(8, 10, 1, 1)
    state = LoadTestState(recorder=recorder, config=RunConfig({"resnet18": 1.0}, {"resnet18": SLA}))
    state.server_view = view
    return state


def test_rows_show_the_batches_against_the_configured_size() -> None:
    state = scraped_state()
    rows = {row["figure"]: row["measured"] for row in server_rows(state.server_view, Window(102.0, 110.0))}
    assert rows["server: mean batch size"] == "2.50 of 8 (31% full)"
    assert rows["server: batches / requests"] == "64 / 160 in 8.0 s"  # scrapes at 102 .. 110
    assert rows["server: queue time (a request)"] == "-"  # TorchServe's own counters absent here
    assert rows["server: worker restarts"] == "0"
    assert rows["server: shed for their deadline (503)"] == "8 of 160 requests"
    assert rows["server: batch settings (management API)"] == "batchSize 8, maxBatchDelay 10 ms, workers 1-1"
    lines = console_lines(state.server_view, Window(102.0, 110.0))
    assert "  resnet18: mean batch size = 2.50 of 8 (31% full)" in lines


def test_an_unreachable_server_is_one_row_saying_why() -> None:
    state = scraped_state(unreachable="metrics endpoint http://m/metrics unreachable (ConnectionError)")
    rows = server_rows(state.server_view, Window(102.0, 110.0))
    assert rows == [
        {
            "model": "all models",
            "figure": "server view",
            "target": "",
            "measured": "unavailable: metrics endpoint http://m/metrics unreachable (ConnectionError)",
            "result": "",
        }
    ]


def test_latency_points_are_exact_percentiles_per_slice() -> None:
    samples = [Sample("m", 0.0 + i * 0.02, float(i), True) for i in range(100)]  # 0..99 ms over 2 s
    points = latency_points(samples, "m", 0.0, 4.0, 2.0)
    assert points["p50"][0] == (1.0, 49.0) and points["p99"][0] == (1.0, 98.0)
    assert points["p50"][1] == (3.0, None)  # nothing sent in the second slice


def test_charts_per_model_latency_always_batches_when_scraped() -> None:
    state = scraped_state()
    window = Window(102.0, 110.0)
    charts = model_charts("resnet18", state.recorder.samples, SLA, state.server_view, window)
    assert [chart.count("<svg") for chart in charts] == [1, 1, 1]
    assert "resnet18: mean batch size" in charts[1] and "batchSize" in charts[1]
    unreachable = scraped_state(unreachable="down")
    only_latency = model_charts(
        "resnet18", unreachable.recorder.samples, SLA, unreachable.server_view, window
    )
    assert len(only_latency) == 1 and "client latency" in only_latency[0]
