"""Typo and punctuation noise for training texts."""

from __future__ import annotations

import random

from tsbatch.kinds.text.noise import add_noise, typo


def test_noise_is_seeded_and_keeps_the_words_recognisable() -> None:
    texts = ["How do I change my PIN?", "what is the routing number for my checking account"]
    first = [add_noise(t, random.Random(7), 1.0) for t in texts * 20]
    assert first == [add_noise(t, random.Random(7), 1.0) for t in texts * 20]
    assert all(noisy.strip() for noisy in first)
    assert add_noise(texts[0], random.Random(7), 0.0) == texts[0]
    rng = random.Random(0)
    for _ in range(50):
        changed = typo("routing", rng)
        assert abs(len(changed) - len("routing")) <= 1 and changed[0] == "r"
    assert typo("pin", rng) == "pin"
