"""The one list-of-numbers option type of the sweep and the tuner."""

from __future__ import annotations

import argparse

import pytest

from tsbatch.analysis.options import decode_threads_list, decode_threads_value, int_list


def test_lists_are_sorted_distinct_and_forgiving_about_spaces() -> None:
    assert int_list("8, 1,3,8,") == [1, 3, 8]


@pytest.mark.parametrize("text", ["", " , ", "1,two", "1.5"])
def test_bad_lists_say_what_was_expected(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected"):
        int_list(text)


def test_decode_pools_are_auto_first_then_sizes() -> None:
    assert decode_threads_list("2, auto,1,2") == ["auto", 1, 2]
    assert decode_threads_list("auto") == ["auto"] and decode_threads_list("4,1") == [1, 4]
    assert [decode_threads_value(text) for text in ("2", "auto", "")] == [2, "auto", None]


@pytest.mark.parametrize("text", ["", "0", "1,fast", "-1"])
def test_bad_decode_pools_say_what_was_expected(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected auto or whole numbers"):
        decode_threads_list(text)
