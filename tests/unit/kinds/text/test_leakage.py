"""Exact and near duplicates between texts, and the groups the split keeps together."""

from __future__ import annotations

from tsbatch.kinds.text.leakage import duplicate_groups, find_duplicates, normalized


def test_normalized_ignores_case_spacing_and_end_punctuation() -> None:
    assert normalized("  What's my  BALANCE?? ") == "what's my balance"
    assert normalized("???") == "???"


def test_exact_repeats_are_found_and_near_ones_only_with_an_overlap() -> None:
    reference = ["what is my balance", "send money to mom"]
    texts = ["What is my balance?", "what is my balance please", "tell me a joke"]
    exact = find_duplicates(texts, reference)
    assert [(d.index, d.reference_index, d.exact) for d in exact] == [(0, 0, True)]
    near = find_duplicates(texts, reference, min_overlap=0.8)
    assert [(d.index, d.reference_index) for d in near] == [(0, 0), (1, 0)]
    assert near[1].overlap == 0.8 and not near[1].exact
    assert find_duplicates(texts, reference, min_overlap=0.9)[1:] == []


def test_groups_join_chains_of_near_duplicates() -> None:
    texts = ["a b c d", "a b c d e", "a b c d e f", "something else entirely", "A B C D"]
    groups = duplicate_groups(texts, 0.8)
    assert groups[0] == groups[1] == groups[2] == groups[4]
    assert groups[3] != groups[0]
