"""Load shapes as a schedule: elapsed seconds -> (users, spawn rate), or None to stop."""

from __future__ import annotations

import pytest

from tsbatch.locust import shapes


def test_steady_holds_then_stops() -> None:
    params = shapes.ShapeParams("steady", users=8, spawn_rate=4, run_time=30)
    assert shapes.target(params, 0) == (8, 4)
    assert shapes.target(params, 29.9) == (8, 4)
    assert shapes.target(params, 30) is None


def test_step_climbs_to_the_top_and_holds() -> None:
    params = shapes.ShapeParams("step", users=10, spawn_rate=5, run_time=60, step_users=4, step_time=10)
    assert [shapes.target(params, t)[0] for t in (0, 9.9, 10, 20, 35, 59)] == [4, 4, 8, 10, 10, 10]
    assert shapes.target(params, 60) is None
    open_ended = shapes.ShapeParams("step", users=8, spawn_rate=5, step_time=5)  # 2 users a step
    assert [shapes.target(open_ended, t)[0] for t in (0, 5, 10, 15)] == [2, 4, 6, 8]
    assert shapes.target(open_ended, 20) is None


def test_spike_jumps_fast_and_comes_back() -> None:
    params = shapes.ShapeParams(
        "spike", users=4, spawn_rate=2, run_time=60
    )  # spike at 20 s for 10 s, 12 users
    assert shapes.target(params, 5) == (4, 2)
    assert shapes.target(params, 20) == (12, 12.0)
    assert shapes.target(params, 29.9) == (12, 12.0)
    assert shapes.target(params, 30) == (4, 12.0)


def test_shape_params_are_validated() -> None:
    with pytest.raises(ValueError):
        shapes.ShapeParams("ramp", users=1, spawn_rate=1)
    with pytest.raises(ValueError):
        shapes.ShapeParams("steady", users=0, spawn_rate=1)
