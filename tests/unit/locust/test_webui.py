"""The web UI's live SLA rows: WAIT during the ramp-up, then the gate's verdict as it stands."""

from __future__ import annotations

from tsbatch.locust.options import RunConfig
from tsbatch.locust.recorder import SampleRecorder
from tsbatch.locust.state import LoadTestState
from tsbatch.locust.webui import live_rows
from tsbatch.sla.profiles import Sla

SLA = Sla("resnet18", "test", p50_ms=20, p95_ms=40, p99_ms=60, max_error_rate=0.02, min_throughput_rps=5)


def state_with(recorder: SampleRecorder) -> LoadTestState:
    return LoadTestState(recorder=recorder, config=RunConfig({"resnet18": 1.0}, {"resnet18": SLA}))


def test_web_ui_rows_wait_during_ramp_up_then_judge() -> None:
    now = [105.0]
    recorder = SampleRecorder(clock=lambda: now[0])
    state = state_with(recorder)
    recorder.record("resnet18", 101.0, 900.0, True)
    rows, summary = live_rows(state)
    assert summary["status"] == "WAIT" and {row["result"] for row in rows} == {"WAIT"}

    recorder.ramp_up_done(when=102.0)
    for i in range(100):
        recorder.record("resnet18", 102.0 + i * 0.08, 10.0, True)
    now[0] = 110.0
    rows, summary = live_rows(state)
    assert summary["status"] == "PASS" and summary["window_s"] == 8.0
    assert (
        rows[0]["measured"] == "8.0 s"
        and rows[3]["figure"] == "p99 latency (ms)"
        and rows[3]["measured"] == "10.0"
    )

    # 5 slow failures in 105: 4.8% errors; p99 = rank 104 = 5000 ms, p95 = rank 100 = 10 ms
    for i in range(5):
        recorder.record("resnet18", 109.0 + i * 0.1, 5000.0, False)
    _, summary = live_rows(state)
    assert summary["status"] == "FAIL"
    assert summary["breaches"] == [
        "resnet18: p99_ms = 5000.0 ms, target <= 60.0 ms",
        "resnet18: max_error_rate = 4.76%, target <= 2.00%",
    ]


def test_web_ui_names_a_configuration_error() -> None:
    state = LoadTestState(config_error="no SLA for ['resnet50'] in profile 'cpu'")
    state.recorder.ramp_up_done(when=1.0)
    rows, summary = live_rows(state)
    assert summary["status"] == "CONFIG ERROR" and summary["error"] == state.config_error
    assert [row["result"] for row in rows] == ["CONFIG ERROR"]  # only the status row: no model to judge
