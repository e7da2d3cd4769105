"""The intent handler at int8 forced: a tiny BERT with dynamically quantized linear layers,
compiled with a dynamic batch and length, served through the handler's own pipeline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from batchkit.loader import load_compiled
from tests.conftest import tiny_encoder
from tests.unit.handlers.conftest import MAX_LENGTH, TINY_LABELS
from tests.unit.handlers.test_text_classifier_handler import body, make_handler
from text_serving.text import check_tokens, load_tokenizer
from tsbatch.archive.compiled import check_record
from tsbatch.archive.int8.quantize import compile_int8, quantized_op_counts
from tsbatch.kinds.text.model import IntentClassifier


@pytest.fixture(scope="module")
def int8_intent_dir(tiny_intent_model_dir, tmp_path_factory) -> tuple[Path, dict]:
    source, model_yaml = tiny_intent_model_dir
    directory = tmp_path_factory.mktemp("tiny_intent_int8") / "archive"
    shutil.copytree(source, directory)
    torch.manual_seed(0)  # the same weights as the traced model of tiny_intent_model_dir
    model = IntentClassifier(tiny_encoder(), len(TINY_LABELS)).eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    tokens = torch.export.Dim("tokens", min=2, max=MAX_LENGTH)
    example = (torch.tensor([[101, 2000, 2001, 102]] * 2), torch.ones(2, 4, dtype=torch.long))
    path = directory / "model.cpu-int8.pt2"
    compile_int8(model, example, ({0: batch, 1: tokens}, {0: batch, 1: tokens}), path, None)
    assert quantized_op_counts(path)["_int_mm"] > 0
    tokenizer = load_tokenizer(directory / model_yaml["handler"]["tokenizer_dir"], MAX_LENGTH)
    record = check_record(load_compiled(path, torch.device("cpu"), "int8"), check_tokens(tokenizer))
    handler = {
        **model_yaml["handler"],
        "precision": "int8",
        "compiled_models": [path.name],
        "compiled_max_batch_size": 8,
        "check_outputs": {"aoti-cpu-int8": record},  # as the build records it
    }
    return directory, {**model_yaml, "handler": handler}


def test_the_handler_serves_the_int8_package_and_batch_mates_do_not_change_an_answer(
    int8_intent_dir, fake_context_factory
) -> None:
    handler, context = make_handler(*int8_intent_dir, fake_context_factory)
    assert (handler.model.runtime, handler.model.precision, handler.model.source) == (
        "aoti",
        "int8",
        "model.cpu-int8.pt2",
    )
    texts = ["what is my balance", "my card was declined at the shop yesterday evening", "send money"]
    together = handler.handle([body(text) for text in texts], context)
    alone = [handler.handle([body(text)], context)[0] for text in texts]
    for batched, single in zip(together, alone, strict=True):
        assert batched["intent"] == single["intent"]
        assert batched["confidence"] == pytest.approx(single["confidence"], abs=1e-5)
    described = handler.describe()
    assert (described["runtime"], described["file"]) == ("aoti", "model.cpu-int8.pt2")
    assert described["why"][0]["code"] == "precision-set"
