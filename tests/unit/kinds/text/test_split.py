"""The committed intent data and the script that splits it (`tsbatch text split`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tsbatch.kinds.text.split import (
    SPLIT_NAMES,
    SplitError,
    check_disjoint,
    main,
    read_examples,
    split_examples,
    without_repeats_of,
)
from tsbatch.kinds.text.utterances import INTENT_DATA_DIR, INTENT_RAW_DIR

BANKING = [
    "freeze_account",
    "routing",
    "pin_change",
    "bill_due",
    "pay_bill",
    "account_blocked",
    "interest_rate",
    "min_payment",
    "bill_balance",
    "transfer",
    "order_checks",
    "balance",
    "spending_history",
    "transactions",
    "report_fraud",
]
CREDIT_CARDS = [
    "replacement_card_duration",
    "expiration_date",
    "damaged_card",
    "improve_credit_score",
    "report_lost_card",
    "card_declined",
    "credit_limit_change",
    "apr",
    "redeem_rewards",
    "credit_limit",
    "rewards_balance",
    "application_status",
    "credit_score",
    "new_card",
    "international_fees",
]


def committed_splits() -> dict[str, list[tuple[str, str]]]:
    return {name: read_examples([INTENT_DATA_DIR / f"{name}.csv"]) for name in SPLIT_NAMES}


def test_raw_data_has_the_issue_intents_and_enough_examples() -> None:
    counts = Counter(label for _, label in read_examples(sorted(INTENT_RAW_DIR.glob("*.csv"))))
    assert set(counts) == {*BANKING, *CREDIT_CARDS, "oos"}
    assert min(counts[intent] for intent in BANKING + CREDIT_CARDS) >= 150
    assert counts["oos"] >= 1500


def test_committed_splits_are_what_the_script_writes() -> None:
    assert main(["--check"]) == 0


def test_committed_splits_share_no_text_nor_near_duplicate() -> None:
    check_disjoint(committed_splits())


def test_near_duplicates_stay_in_one_split() -> None:
    near = [("what is my balance", "a"), ("what is my balance please", "a"), ("what is my balance now", "a")]
    examples = near + [(f"distinct text number {i} {'x' * i}", "a") for i in range(12)]
    splits = split_examples(examples, seed=1)
    homes = {name for name, rows in splits.items() for row in rows if row in near}
    assert len(homes) == 1
    with pytest.raises(SplitError, match="repeats"):
        check_disjoint({"train": near[:1], "test": near[1:2]})


def test_committed_splits_are_stratified_60_20_20() -> None:
    splits = committed_splits()
    total = Counter(label for examples in splits.values() for _, label in examples)
    for name, share in zip(SPLIT_NAMES, (0.6, 0.2, 0.2), strict=True):
        counts = Counter(label for _, label in splits[name])
        assert set(counts) == set(total), f"{name} lacks labels"
        for label, count in counts.items():
            # Groups of near duplicates move together, so a share can be off by a few.
            assert abs(count - share * total[label]) <= max(3, 0.03 * total[label]), (name, label, count)


def test_split_is_deterministic_and_independent_of_row_order() -> None:
    examples = [(f"utterance {i} for {label}", label) for label in ("a", "b", "oos") for i in range(20)]
    first = split_examples(examples, seed=3)
    assert split_examples(list(reversed(examples)), seed=3) == first
    assert split_examples(examples, seed=4) != first


def test_duplicates_are_refused_before_they_can_leak_across_splits() -> None:
    examples = [(f"text {i}", "a") for i in range(10)] + [("Text 3?", "b")]
    with pytest.raises(SplitError, match="duplicate"):
        split_examples(examples)


def test_bad_raw_files_are_refused(tmp_path: Path) -> None:
    bad_columns = tmp_path / "bad.csv"
    bad_columns.write_text("utterance,intent\nhello,greeting\n")
    with pytest.raises(SplitError, match="columns"):
        read_examples([bad_columns])
    tiny = [("only one", "rare"), *[(f"text {i}", "a") for i in range(10)]]
    with pytest.raises(SplitError, match="at least"):
        split_examples(tiny)


def test_main_writes_the_three_files(tmp_path: Path) -> None:
    raw = tmp_path / "raw.csv"
    raw.write_text("text,label\n" + "".join(f"sentence {i},{'ab'[i % 2]}\n" for i in range(20)))
    assert main(["--raw", str(raw), "--out", str(tmp_path)]) == 0
    written = {name: read_examples([tmp_path / f"{name}.csv"]) for name in SPLIT_NAMES}
    assert sum(len(v) for v in written.values()) == 20
    assert main(["--raw", str(raw), "--out", str(tmp_path), "--check"]) == 0


def test_raw_texts_that_repeat_the_held_out_set_are_left_out() -> None:
    raw = [("what is my balance please", "balance"), ("send money to mom", "transfer"), ("hi", "oos")]
    held_out = [("What is my balance", "balance"), ("hi!", "oos")]
    assert without_repeats_of(raw, held_out, min_overlap=1.0) == [raw[0], raw[1]]
    assert without_repeats_of(raw, held_out) == [raw[1]]  # near repeats too, by default


def test_committed_splits_hold_nothing_of_the_blind_set() -> None:
    blind = INTENT_DATA_DIR / "blind.csv"
    if not blind.exists():
        pytest.skip("no blind set in this checkout")
    rows = [row for examples in committed_splits().values() for row in examples]
    assert without_repeats_of(rows, read_examples([blind])) == rows
