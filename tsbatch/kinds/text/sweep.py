"""The intent classifier in the in-process sweep: its built archive, or its base encoder with
a random head (timing only), fed our utterances padded to the longest of each batch as the
handler pads, and a fixed long length."""

from __future__ import annotations

from pathlib import Path

import torch

from tsbatch.analysis.sweep.inputs import POOL_SIZE, Scenario, cycle
from tsbatch.analysis.sweep.swept import SweptModel
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec
from tsbatch.kinds.text.schema import TextModel
from tsbatch.kinds.text.utterances import read_utterances


def text_scenarios(tokenizer_dir: Path, max_length: int, pool_size: int = POOL_SIZE) -> list[Scenario]:
    """Our utterances padded to the longest of each batch, and all samples at ``max_length``."""
    from text_serving.text import load_tokenizer, pad_id, pad_to_longest, tokenize

    tokenizer = load_tokenizer(tokenizer_dir, max_length)
    padding = pad_id(tokenizer)
    texts = read_utterances(shuffle_seed=0)
    ids = tokenize(tokenizer, texts[:pool_size]).ids
    # Long inputs: several utterances joined and truncated, so every sample is max_length real tokens.
    joined = [" ".join(cycle(texts[i:] + texts[:i], 12)) for i in range(pool_size)]
    long_ids = tokenize(tokenizer, joined).ids

    def scenario(name: str, pool: list[list[int]]) -> Scenario:
        return Scenario(
            name=name,
            batch=lambda b, offset=0: pad_to_longest(cycle(pool, b, offset), padding),
            single=lambda i: pad_to_longest([pool[i % len(pool)]], padding),
        )

    lengths = sorted(len(row) for row in ids)
    return [
        scenario(f"utterances (median {lengths[len(lengths) // 2]} tok)", ids),
        scenario(f"fixed {max(len(row) for row in long_ids)} tok", long_ids),
    ]


def archive_swept_model(name: str, artifact_dir: Path) -> SweptModel:
    handler = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    tokenizer_dir = artifact_dir / handler.get("tokenizer_dir", "tokenizer")
    module = torch.jit.load(
        str(artifact_dir / handler.get("model_file", artifacts.MODEL_FILE)), map_location="cpu"
    )
    return SweptModel(
        name=name,
        sla_model=name,
        description=f"build/{name}/model.pt ({handler.get('base_model', 'text model')}, max_length {handler['max_length']})",
        module=module.eval(),
        scenarios=text_scenarios(tokenizer_dir, int(handler["max_length"])),
    )


def stand_in(spec: ModelSpec, work_dir: Path) -> SweptModel:
    """The intent model's shape without its training: the base encoder with a RANDOM head
    (timing only), for a machine where the model was not built."""
    from tsbatch.kinds.text.model import IntentClassifier, load_encoder, save_tokenizer

    settings = spec.entry_as(TextModel)
    max_length, base = settings.max_length, settings.base_model
    torch.manual_seed(0)
    model = IntentClassifier(load_encoder(base), num_labels=16).eval()
    tokenizer_dir = save_tokenizer(base, work_dir / "tokenizer", max_length)
    return SweptModel(
        name=f"{spec.name}-{spec.kind.stand_in}",
        sla_model=spec.name,
        description=f"{base} encoder + RANDOM 16-way head, eager PyTorch - timing only (build/{spec.name} missing)",
        module=model,
        scenarios=text_scenarios(tokenizer_dir, max_length),
    )
