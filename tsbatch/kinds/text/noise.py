"""Typo and punctuation noise for training texts, so that real users' spelling does not
surprise the model: written examples are tidier than what people type."""

from __future__ import annotations

import random

KEYBOARD_NEIGHBOURS = {
    row[i]: row[max(0, i - 1)] + row[i + 1 : i + 2]
    for row in ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    for i in range(len(row))
}


def typo(word: str, rng: random.Random) -> str:
    """One keyboard slip: swap, drop, double or hit a neighbouring key."""
    if len(word) < 4 or not word.isalpha():
        return word
    position = rng.randrange(1, len(word) - 1)
    kind = rng.randrange(4)
    if kind == 0:
        return word[:position] + word[position + 1] + word[position] + word[position + 2 :]
    if kind == 1:
        return word[:position] + word[position + 1 :]
    if kind == 2:
        return word[:position] + word[position] + word[position:]
    neighbours = KEYBOARD_NEIGHBOURS.get(word[position].lower(), "")
    return word[:position] + (rng.choice(neighbours) if neighbours else word[position]) + word[position + 1 :]


def add_noise(text: str, rng: random.Random, probability: float) -> str:
    """Light, label-preserving noise of the kinds people type: typos, no punctuation."""
    if probability <= 0 or rng.random() >= probability:
        return text
    words = text.split()
    if rng.random() < 0.6:
        index = rng.randrange(len(words))
        words[index] = typo(words[index], rng)
    if rng.random() < 0.5:
        words = [word.strip("?!.,") or word for word in words]
    if len(words) > 5 and rng.random() < 0.2:
        del words[rng.randrange(len(words))]
    return " ".join(words)
