"""Which steps ``tsbatch apply`` takes for which change, and how a staged version is named."""

from __future__ import annotations

import pytest

from tsbatch.server.apply_plan import (
    IN_PLACE,
    STAGED,
    Step,
    is_staged,
    plan_change,
    staged_archive,
    staged_version,
)
from tsbatch.settings.batch import BatchSettings

SERVED = BatchSettings.for_point(8, 10, 1)


def test_the_settings_served_need_no_step() -> None:
    plan = plan_change("resnet18", "1.0", SERVED, SERVED)
    assert plan.steps == () and plan.new_version is None


def test_more_workers_alone_scale_in_place() -> None:
    plan = plan_change("resnet18", "1.0", SERVED, SERVED.changed(workers=2))
    assert plan.steps == IN_PLACE and plan.new_version is None


@pytest.mark.parametrize(
    "wanted",
    [
        SERVED.changed(batch_size=16),
        SERVED.changed(max_batch_delay_ms=20),
        SERVED.changed(batch_size=4, workers=2),
    ],
)
def test_a_batch_change_stages_a_new_version(wanted: BatchSettings) -> None:
    plan = plan_change("resnet18", "1.0", SERVED, wanted)
    assert plan.steps == STAGED
    assert plan.new_version == staged_version("1.0", wanted)


def test_fewer_workers_stage_a_new_version_too() -> None:
    """A scale-down can fail the batch a removed worker computes: never done in place."""
    plan = plan_change("resnet18", "1.0", SERVED.changed(workers=2), SERVED)
    assert plan.steps == STAGED and "fewer workers" in plan.reason


def test_the_old_version_goes_only_after_the_switch_and_the_drain() -> None:
    order = list(STAGED)
    assert order.index(Step.PROBE) < order.index(Step.SET_DEFAULT) < order.index(Step.DRAIN)
    assert order.index(Step.DRAIN) < order.index(Step.UNREGISTER) < order.index(Step.VERIFY)
    assert order.index(Step.WAIT_READY) < order.index(Step.PROBE)


def test_settings_torchserve_cannot_serve_are_refused() -> None:
    for wanted in (
        SERVED.changed(batch_size=0),
        SERVED.changed(max_batch_delay_ms=-1),
        SERVED.changed(workers=0),
    ):
        with pytest.raises(ValueError, match="resnet18"):
            plan_change("resnet18", "1.0", SERVED, wanted)


def test_a_staged_version_names_its_settings_and_replaces_an_earlier_suffix() -> None:
    wanted = BatchSettings.for_point(16, 20, 1)
    assert staged_version("1.0", wanted) == "1.0.b16d20w1"
    assert staged_version("1.0.b8d10w1", wanted) == "1.0.b16d20w1"
    assert staged_version("2.3.b8d10w1r2", wanted) == "2.3.b16d20w1"


def test_a_staged_version_never_repeats_the_one_served() -> None:
    """1.0.b8d10w1 scaled in place to 2 workers, then back to 1: a version TorchServe has not seen."""
    plan = plan_change(
        "m", "1.0.b8d10w1", BatchSettings.for_point(8, 10, 2), BatchSettings.for_point(8, 10, 1)
    )
    assert plan.new_version == "1.0.b8d10w1r2"


def test_only_an_archive_apply_staged_counts_as_staged() -> None:
    assert is_staged("resnet18", "1.0.b4d25w1", staged_archive("resnet18", "1.0.b4d25w1"))
    assert not is_staged("resnet18", "1.0", "resnet18.mar")
    assert not is_staged("resnet18", "1.0.b4d25w1", "resnet18.mar")
    assert is_staged("resnet18", "1.0.b4d25w1", "resnet18-1.0.b4d25w1.mar"), "what earlier releases staged"


def test_leftovers_of_a_stopped_apply_are_removed_and_foreign_versions_refused() -> None:
    from tsbatch.server.apply_plan import leftovers

    # stopped before set-default: the staged version goes
    assert leftovers("1.0", ["1.0.b4d10w1"]).remove == ("1.0.b4d10w1",)
    # stopped during the drain: the old version beside the staged default goes
    assert leftovers("1.0.b4d10w1", ["1.0"]).remove == ("1.0",)
    both_staged = leftovers("1.0.b4d10w1", ["1.0.b8d10w1"])
    assert both_staged.remove == ("1.0.b8d10w1",) and both_staged.problem("resnet18") is None
    foreign = leftovers("1.0", ["2.0"])
    assert foreign.remove == () and "['2.0']" in str(foreign.problem("resnet18"))


def test_orphan_archives_are_the_staged_ones_nothing_serves() -> None:
    from tsbatch.server.apply_plan import orphan_archives

    files = ["resnet18.mar", "resnet18-1.0.b4d10w1.mar", "resnet18-1.0.b6d20w2", "bert_intent-1.0.b4d10w1",
             "resnet18-notes.mar", "resnet18-1.0.b2d10w2"]  # fmt: skip
    assert orphan_archives("resnet18", files, ["1.0.b6d20w2"]) == [
        "resnet18-1.0.b2d10w2",
        "resnet18-1.0.b4d10w1.mar",
    ]


def test_a_scale_in_place_waits_for_the_new_workers() -> None:
    plan = plan_change("resnet18", "1.0", SERVED, SERVED.changed(workers=2))
    assert plan.steps.index(Step.WAIT_READY) == plan.steps.index(Step.SCALE) + 1
