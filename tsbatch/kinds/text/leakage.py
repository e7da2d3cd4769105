"""Exact and near duplicates between texts: the leakage check across splits.

A text that also appears in training, or nearly so ("what is my balance" and "what is my
balance please"), scores what the model memorised rather than what it learned. Two texts
are duplicates when their normalized forms are equal, or when their word sets overlap by
at least ``min_overlap`` (Jaccard: shared words / all words).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def normalized(text: str) -> str:
    """The form two texts are compared in: case, spacing and end punctuation ignored."""
    spaced = " ".join(text.lower().split())
    return spaced.rstrip("?!. ") or spaced  # "..." and "?????" stay distinct


def words(text: str) -> frozenset[str]:
    return frozenset(WORD.findall(text.lower()))


@dataclass(frozen=True)
class Duplicate:
    """``texts[index]`` repeats ``reference[reference_index]``; overlap 1.0 for exact repeats."""

    index: int
    reference_index: int
    overlap: float

    @property
    def exact(self) -> bool:
        return self.overlap >= 1.0


def _word_matrix(sets: Sequence[frozenset[str]], vocabulary: dict[str, int]) -> sparse.csr_matrix:
    rows = [i for i, found in enumerate(sets) for _ in found]
    columns = [vocabulary[word] for found in sets for word in found]
    return sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, columns)), shape=(len(sets), len(vocabulary))
    )


def word_overlaps(
    texts: Sequence[str], reference: Sequence[str], min_overlap: float
) -> list[tuple[int, int, float]]:
    """(i, j, Jaccard) for every pair with word overlap >= ``min_overlap`` (sparse product)."""
    left, right = [words(t) for t in texts], [words(t) for t in reference]
    vocabulary: dict[str, int] = {}
    for found in (*left, *right):
        for word in found:
            vocabulary.setdefault(word, len(vocabulary))
    if not vocabulary:
        return []
    shared = (_word_matrix(left, vocabulary) @ _word_matrix(right, vocabulary).T).tocoo()
    sizes_left = np.array([len(s) for s in left])
    sizes_right = np.array([len(s) for s in right])
    union = sizes_left[shared.row] + sizes_right[shared.col] - shared.data
    jaccard = shared.data / np.maximum(union, 1)
    keep = jaccard >= min_overlap - 1e-9
    return [
        (int(i), int(j), float(v))
        for i, j, v in zip(shared.row[keep], shared.col[keep], jaccard[keep], strict=True)
    ]


def find_duplicates(
    texts: Sequence[str], reference: Sequence[str], min_overlap: float | None = None
) -> list[Duplicate]:
    """The texts that repeat a reference text: exactly (normalized), or with word overlap
    >= ``min_overlap`` when it is set. One entry per text, its closest reference."""
    found: dict[int, Duplicate] = {}
    owner = {normalized(text): j for j, text in enumerate(reference)}
    for i, text in enumerate(texts):
        j = owner.get(normalized(text))
        if j is not None:
            found[i] = Duplicate(i, j, 1.0)
    if min_overlap is not None:
        for i, j, overlap in word_overlaps(texts, reference, min_overlap):
            if i not in found or overlap > found[i].overlap:
                found[i] = Duplicate(i, j, min(overlap, 1.0))
    return [found[i] for i in sorted(found)]


def duplicate_groups(texts: Sequence[str], min_overlap: float) -> list[int]:
    """A group id per text: texts that repeat each other (directly or through a chain)
    share one, so a split can keep each group whole."""
    parent = list(range(len(texts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    pairs = [(i, first.setdefault(normalized(text), i)) for i, text in enumerate(texts)]
    pairs += [(i, j) for i, j, _ in word_overlaps(texts, texts, min_overlap) if i < j]
    for i, j in pairs:
        parent[root(i)] = root(j)
    return [root(i) for i in range(len(texts))]
