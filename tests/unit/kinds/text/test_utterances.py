"""The one utterance reader: the held-out split first, the raw files while it is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.kinds.text.utterances import read_utterances


def test_the_test_split_is_read_when_it_exists(tmp_path: Path) -> None:
    split = tmp_path / "test.csv"
    split.write_text('text,label\nfreeze my card,freeze_account\n"where is it, my card",card_arrival\n\n')
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.csv").write_text("text,label\nnot this one,greeting\n")
    assert read_utterances(split, raw) == ["freeze my card", "where is it, my card"]


def test_the_raw_files_are_read_while_the_split_is_missing(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.csv").write_text("text,label\nhello there,greeting\n")
    (raw / "b.csv").write_text("text,label\nwhat's the weather,oos\n")
    assert read_utterances(tmp_path / "missing.csv", raw) == ["hello there", "what's the weather"]
    with pytest.raises(FileNotFoundError):
        read_utterances(tmp_path / "missing.csv", tmp_path / "nothing")


def test_a_shuffle_seed_gives_the_same_texts_in_a_fixed_other_order(tmp_path: Path) -> None:
    split = tmp_path / "test.csv"
    split.write_text("text,label\n" + "".join(f"utterance {i},x\n" for i in range(30)))
    in_order = read_utterances(split, tmp_path)
    shuffled = read_utterances(split, tmp_path, shuffle_seed=0)
    assert shuffled != in_order and sorted(shuffled) == sorted(in_order)
    assert read_utterances(split, tmp_path, shuffle_seed=0) == shuffled


def test_the_projects_own_utterances_load() -> None:
    assert len(read_utterances()) > 50
