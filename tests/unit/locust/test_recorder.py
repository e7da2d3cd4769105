"""The recorder's measured window (ramp-up and warm-up left out), sample shipping and load levels."""

from __future__ import annotations

from tsbatch.locust.recorder import SampleRecorder
from tsbatch.sla import gate
from tsbatch.sla.gate import Sample
from tsbatch.sla.levels import LoadLevel


def samples_with_slow_ramp_up() -> list[Sample]:
    """Ramp-up (t < 100) is slow and failing; the steady part (t >= 100) is fast."""
    ramp = [Sample("resnet18", 95 + i * 0.1, 900.0, ok=i % 2 == 0) for i in range(40)]
    steady = [Sample("resnet18", 100 + i * 0.1, 10.0 + i % 10, ok=True) for i in range(100)]
    return ramp + steady


def test_recorder_window_starts_at_spawning_complete_plus_warmup() -> None:
    recorder = SampleRecorder(warmup_s=2.0, clock=lambda: 200.0)
    assert recorder.window().start is None  # still ramping up: nothing measured yet
    recorder.ramp_up_done(when=100.0)
    recorder.ramp_up_done(when=150.0)  # a later spawning_complete (shape step) does not move it
    recorder.stopped(when=110.0)
    window = recorder.window()
    assert (window.start, window.end, window.seconds) == (102.0, 110.0, 8.0)
    for sample in samples_with_slow_ramp_up():
        recorder.record(sample.model, sample.start, sample.response_time_ms, sample.ok)
    measured = gate.measure(recorder.samples, "resnet18", recorder.window())
    assert measured.requests == 80  # 100 <= t < 102 is warm-up too


def test_recorder_window_is_empty_when_stopped_during_warmup() -> None:
    recorder = SampleRecorder(warmup_s=30.0)
    recorder.ramp_up_done(when=100.0)
    recorder.stopped(when=105.0)
    assert recorder.window().seconds == 0.0


def test_recorder_reset_and_drain() -> None:
    recorder = SampleRecorder()
    recorder.ramp_up_done(when=1.0)
    recorder.record("resnet18", 2.0, 5.5, True)
    rows = recorder.drain()
    assert rows == [["resnet18", 2.0, 5.5, True]] and recorder.samples == []
    master = SampleRecorder()
    master.extend(rows)
    assert master.samples == [Sample("resnet18", 2.0, 5.5, True)]
    recorder.reset()
    assert recorder.window().start is None


def test_recorder_levels_skip_each_ramp() -> None:
    recorder = SampleRecorder(clock=lambda: 30.0)
    recorder.add_level(2, 1.0, when=0.0)
    recorder.add_level(4, 1.0, when=10.0)
    recorder.stopped(when=20.0)
    assert recorder.load_levels() == [LoadLevel(2, 2.0, 10.0), LoadLevel(4, 12.0, 20.0)]


def test_reset_stats_restarts_the_window_now_without_warmup() -> None:
    recorder = SampleRecorder(warmup_s=5.0, clock=lambda: 120.0)
    recorder.ramp_up_done(when=100.0)
    recorder.record("resnet18", 110.0, 5.0, True)
    recorder.reset_samples()
    assert recorder.samples == []
    assert recorder.window(now=130.0) == gate.Window(120.0, 130.0)


def test_the_window_opening_is_known_ahead_inside_the_warmup() -> None:
    """The server scraper times its scrape to the opening, which may still lie ahead."""
    recorder = SampleRecorder(warmup_s=5.0, clock=lambda: 101.0)
    assert recorder.window_opens() is None
    recorder.ramp_up_done(when=100.0)
    assert recorder.window_opens() == 105.0
    assert recorder.window().start == 101.0  # the window itself is empty until then
