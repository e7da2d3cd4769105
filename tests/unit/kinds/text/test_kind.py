"""The text kind's own limit: a full request of the longest texts must fit the body limit."""

from __future__ import annotations

from tsbatch.archive.manifest import load_manifest
from tsbatch.kinds.text.kind import TEXT


def test_too_many_long_texts_for_the_body_limit_are_a_warning() -> None:
    spec = load_manifest().model("bert_intent")  # 64 inputs of 64 tokens, 64 KiB
    assert TEXT.limits("m", spec.config, 6553500) == []
    larger = spec.with_settings(max_inputs_per_request=200).config
    (problem,) = TEXT.limits("m", larger, 6553500)
    assert (
        problem.where == "m.max_inputs_per_request"
        and "Lower max_inputs_per_request to 127" in problem.message
    )
