"""The one list-of-numbers option type of the sweep and the tuner."""

from __future__ import annotations

import argparse

import pytest

from tsbatch.analysis.options import int_list


def test_lists_are_sorted_distinct_and_forgiving_about_spaces() -> None:
    assert int_list("8, 1,3,8,") == [1, 3, 8]


@pytest.mark.parametrize("text", ["", " , ", "1,two", "1.5"])
def test_bad_lists_say_what_was_expected(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected"):
        int_list(text)
