"""Text requests to padded token tensors: decoding, one-call tokenization, length-aware batching.

Shared by the text classifier handler, the training script (so the model is trained on exactly the
token ids it is served) and the tests. Padding goes to the longest item of a (sub-)batch,
never to ``max_length``: a transformer's cost grows with the padded size, and intent
queries are mostly a dozen tokens long.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from batchkit.batching import plan_sub_batches
from batchkit.metrics import PaddingStats
from batchkit.payloads import check_size, parse_json_object
from batchkit.protocols import InputSchema
from text_serving.errors import InvalidText

TOKENIZER_FILE = "tokenizer.json"
TEXT_KEY = "text"
TEXT_INPUTS = InputSchema(single_key=TEXT_KEY, list_key="texts", error=InvalidText)
# The fixed inputs the build records each candidate's outputs on and every worker re-runs
# after loading (``batchkit.loader``): two lengths, so the padded path is checked too.
CHECK_TEXTS = ("i think someone used my card without asking, please freeze it now", "hello there")


# ---- request bodies --------------------------------------------------------------
def text_from_body(body: Any, max_body_bytes: int) -> str:
    """The text of one request: a UTF-8 body, or the JSON object ``{"text": "..."}``.

    TorchServe hands JSON bodies over already decoded, ``text/*`` bodies as ``str`` and
    everything else (or text that is not UTF-8) as bytes; all of them end up here.
    """
    check_size(body, max_body_bytes)
    if isinstance(body, bytes | bytearray):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidText(f"body is not valid UTF-8 (byte {exc.start})") from exc
    document = parse_json_object(body, InvalidText)
    if document is not None:
        body = _text_field(document)
    if not isinstance(body, str):
        raise InvalidText(f'expected text or a JSON object {{"text": "..."}}, got {type(body).__name__}')
    if not body.strip():
        raise InvalidText("text is empty")
    return body


def _text_field(document: dict[str, Any]) -> Any:
    extra = sorted(set(document) - {TEXT_KEY})
    if TEXT_KEY not in document or extra:
        raise InvalidText(
            f'JSON body must be {{"text": "..."}} (several: {{"texts": [...]}}, KServe '
            f'{{"instances": [...]}} or {{"inputs": [...]}}; got keys {sorted(document)})'
        )
    value = document[TEXT_KEY]
    if not isinstance(value, str):
        raise InvalidText(f"'text' must be a string, got {type(value).__name__}")
    return value


# ---- tokenization ----------------------------------------------------------------
def load_tokenizer(path: str | Path, max_length: int) -> Tokenizer:
    """A fast tokenizer that truncates at ``max_length`` and never pads by itself.

    ``path`` is a ``tokenizer.json`` file or a folder holding one. Hugging Face files often
    carry a fixed padding (all-MiniLM's pads to 128), which would undo length-aware
    batching, so padding is switched off here whatever the file says.
    """
    path = Path(path)
    file = path / TOKENIZER_FILE if path.is_dir() else path
    tokenizer = Tokenizer.from_file(str(file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def pad_id(tokenizer: Tokenizer) -> int:
    """The id padding uses: the tokenizer's [PAD] (or <pad>) token, else 0."""
    for token in ("[PAD]", "<pad>"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    return 0


@dataclass(frozen=True)
class TokenizedTexts:
    """Token ids of each text (unpadded) and whether it was cut at ``max_length``."""

    ids: list[list[int]]
    truncated: list[bool]

    @property
    def lengths(self) -> list[int]:
        return [len(ids) for ids in self.ids]


def tokenize(tokenizer: Tokenizer, texts: Sequence[str]) -> TokenizedTexts:
    """One batched call of the fast tokenizer for every text of a batch."""
    encodings = tokenizer.encode_batch(list(texts))
    return TokenizedTexts(
        ids=[encoding.ids for encoding in encodings],
        truncated=[bool(encoding.overflowing) for encoding in encodings],
    )


def bucket_length(length: int, multiple: int, max_length: int | None = None) -> int:
    """``length`` rounded up to a multiple of ``multiple`` (no further than ``max_length``)."""
    rounded = -(-length // multiple) * multiple if multiple > 1 else length
    return min(rounded, max_length) if max_length is not None else rounded


def length_buckets(max_length: int, multiple: int) -> list[int]:
    """Every padded length a batch can get: what a worker warms up."""
    return sorted({bucket_length(length, multiple, max_length) for length in range(1, max_length + 1)})


def pad_to_longest(
    ids: Sequence[Sequence[int]],
    pad_token_id: int = 0,
    multiple: int = 1,
    max_length: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` and ``attention_mask`` (int64, [batch, longest]) for a group of items,
    the longest rounded up to ``multiple`` (at most ``max_length``).

    Rounding bounds the shapes a worker ever sees. Every new (batch, length) shape costs
    a compiled package or TorchScript memory that stays (oneDNN keeps a primitive per
    shape), and creating it costs more time than the few padded tokens do."""
    if not ids:
        raise ValueError("cannot pad an empty group")
    longest = bucket_length(max(len(row) for row in ids), multiple, max_length)
    input_ids = torch.full((len(ids), longest), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(ids), longest), dtype=torch.long)
    for row, token_ids in enumerate(ids):
        input_ids[row, : len(token_ids)] = torch.as_tensor(token_ids, dtype=torch.long)
        attention_mask[row, : len(token_ids)] = 1
    return input_ids, attention_mask


def check_tokens(tokenizer: Tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """``CHECK_TEXTS`` tokenized and padded as a served batch is."""
    return pad_to_longest(tokenize(tokenizer, CHECK_TEXTS).ids, pad_id(tokenizer))


# ---- length-aware batching -------------------------------------------------------
def split_by_length(sorted_lengths: Sequence[int], pass_overhead_tokens: int) -> list[tuple[int, int]]:
    """Cut lengths sorted longest first into contiguous runs that minimise the total cost.

    Cost of a run = ``pass_overhead_tokens`` (the fixed price of one forward pass,
    expressed in tokens) + items x longest item. Padding a 6-token query to a 60-token
    neighbour costs more than a second forward pass; padding it to an 8-token one does not.
    Exact dynamic programme over the (small) batch; returns ``(start, stop)`` pairs.
    """
    count = len(sorted_lengths)
    if any(a < b for a, b in pairwise(sorted_lengths)):
        raise ValueError("lengths must be sorted longest first")
    best = [0.0] + [float("inf")] * count
    cut = [0] * (count + 1)
    for stop in range(1, count + 1):
        for start in range(stop):
            cost = best[start] + pass_overhead_tokens + (stop - start) * max(1, sorted_lengths[start])
            if cost < best[stop]:
                best[stop], cut[stop] = cost, start
    runs: list[tuple[int, int]] = []
    stop = count
    while stop > 0:
        runs.append((cut[stop], stop))
        stop = cut[stop]
    return runs[::-1]


def plan_groups(
    lengths: Sequence[int], token_budget: int, max_items: int | None = None, pass_overhead_tokens: int = 0
) -> list[list[int]]:
    """Index groups to run one forward pass each, every index exactly once.

    First the token budget (``batching.plan_sub_batches``: memory stays bounded however
    long the batch), then, inside each group, a split where lengths differ so widely that
    a second pass is cheaper than the padding. With ``pass_overhead_tokens`` = 0 the
    split is skipped. Each group is sorted longest first.
    """
    groups: list[list[int]] = []
    for group in plan_sub_batches(lengths, token_budget, max_items):
        if pass_overhead_tokens <= 0 or len(group) == 1:
            groups.append(group)
            continue
        group_lengths = [lengths[i] for i in group]
        groups.extend(
            group[start:stop] for start, stop in split_by_length(group_lengths, pass_overhead_tokens)
        )
    return groups


@dataclass(frozen=True)
class TextScores:
    """One text's class probabilities, whether it was cut at ``max_length``, and how it ran:
    its token count, the length its forward pass padded it to, and which pass that was."""

    probabilities: list[float]
    truncated: bool
    tokens: int
    padded_length: int
    forward_pass: int


def padding_of(scores: Sequence[TextScores]) -> PaddingStats:
    """Real and padded token counts of the forward passes that produced ``scores``."""
    return PaddingStats(
        real_tokens=sum(score.tokens for score in scores),
        padded_tokens=sum(score.padded_length for score in scores),
        forward_passes=len({score.forward_pass for score in scores}),
    )
