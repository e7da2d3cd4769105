"""Reading a user's save_pretrained folder: what is taken from it, and each way it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.classifier_folders import LABELS, TOKENS, edited_copy
from text_serving.text import load_tokenizer, pad_id, pad_to_longest, tokenize
from tsbatch.kinds.text.model import save_tokenizer
from tsbatch.kinds.text.pretrained import (
    MAX_LENGTH_CAP,
    PretrainedError,
    SequenceClassifier,
    check_inputs,
    default_max_length,
    load_classifier,
    read_folder,
)

ARCHITECTURES = {
    "bert": "BertForSequenceClassification",
    "distilbert": "DistilBertForSequenceClassification",
    "roberta": "RobertaForSequenceClassification",
}


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_a_folder_gives_its_labels_architecture_and_length(name: str, text_classifier_folders) -> None:
    folder = read_folder(text_classifier_folders[name])
    assert folder.labels == LABELS[name]
    assert (folder.model_type, folder.architecture) == (name, ARCHITECTURES[name])
    assert folder.tokenizer_limit == TOKENS
    assert {"config.json", "model.safetensors"} == set(folder.files)
    length, why = default_max_length(folder)
    assert length == TOKENS and why.startswith("the tokenizer's model_max_length")


def test_without_a_tokenizer_limit_the_positions_or_the_cap_decide(text_classifier_folders) -> None:
    folder = read_folder(text_classifier_folders["bert"])
    unbounded = type(folder)(**{**folder.__dict__, "tokenizer_limit": None})
    assert default_max_length(unbounded)[0] == TOKENS  # max_position_embeddings
    long = type(folder)(**{**folder.__dict__, "tokenizer_limit": None, "positions": 512})
    length, why = default_max_length(long)
    assert length == MAX_LENGTH_CAP and why.startswith("the serving cap")


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_the_served_signature_gives_the_hugging_face_logits(
    name: str, text_classifier_folders, tmp_path: Path
) -> None:
    """(ids, mask) -> logits equals ``model(input_ids=..., attention_mask=...).logits`` with padding."""
    folder = read_folder(text_classifier_folders[name])
    model = load_classifier(folder)
    tokenizer_dir = save_tokenizer(str(folder.path), tmp_path / "tokenizer", TOKENS)
    check_inputs(model, folder, tokenizer_dir, TOKENS)
    tokenizer = load_tokenizer(tokenizer_dir, TOKENS)
    ids, mask = pad_to_longest(
        tokenize(tokenizer, ["hi", "where is my parcel, it is late"]).ids, pad_id(tokenizer)
    )
    assert mask[0].sum() < mask[1].sum()  # the first row is padded
    with torch.inference_mode():
        expected = model(input_ids=ids, attention_mask=mask).logits
        assert torch.allclose(SequenceClassifier(model)(ids, mask), expected, atol=1e-5)


def test_a_path_that_is_not_a_folder_or_lacks_config_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        PretrainedError, match=r"is not a folder: give the folder that model\.save_pretrained"
    ):
        read_folder(tmp_path / "missing")
    with pytest.raises(
        PretrainedError, match=r"has no config\.json: save your model with model\.save_pretrained"
    ):
        read_folder(tmp_path)


def test_a_config_without_id2label_is_refused_saying_how_to_name_the_labels(
    text_classifier_folders, tmp_path: Path
) -> None:
    folder = edited_copy(
        text_classifier_folders["bert"], tmp_path / "no-labels", id2label=None, label2id=None
    )
    with pytest.raises(PretrainedError, match=r"has no id2label .* set model.config.id2label = "):
        read_folder(folder)
    gap = edited_copy(text_classifier_folders["bert"], tmp_path / "gap", id2label={"0": "a", "2": "b"})
    with pytest.raises(PretrainedError, match=r"id2label must name every index 0..1 once"):
        read_folder(gap)


def test_an_architecture_without_a_sequence_classifier_is_refused(
    text_classifier_folders, tmp_path: Path
) -> None:
    folder = edited_copy(text_classifier_folders["bert"], tmp_path / "vit", model_type="vit")
    with pytest.raises(PretrainedError, match=r"model_type 'vit' has no sequence classifier in transformers"):
        read_folder(folder)


def test_a_folder_without_weights_is_refused(text_classifier_folders, tmp_path: Path) -> None:
    folder = edited_copy(text_classifier_folders["bert"], tmp_path / "no-weights")
    (folder / "model.safetensors").unlink()
    with pytest.raises(PretrainedError, match=r"has no weights \(model.safetensors or pytorch_model.bin\)"):
        read_folder(folder)


def test_a_base_encoder_without_its_classification_head_is_refused(tmp_path: Path) -> None:
    """Loaded as a classifier it would get a random head: refused, not served."""
    from transformers import BertConfig, BertModel

    from tests.classifier_folders import TINY, label_maps, save, wordpiece_tokenizer

    tokenizer = wordpiece_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer), max_position_embeddings=TOKENS, **TINY, **label_maps(["a", "b"])
    )
    folder = read_folder(save(tmp_path / "encoder", BertModel(config), tokenizer))
    with pytest.raises(
        PretrainedError, match=r"lack 2 BertForSequenceClassification parameters \(classifier"
    ):
        load_classifier(folder)


def test_a_tokenizer_padding_with_another_id_than_the_model_is_refused(
    text_classifier_folders, tmp_path: Path
) -> None:
    folder = read_folder(edited_copy(text_classifier_folders["roberta"], tmp_path / "pad", pad_token_id=3))
    tokenizer_dir = save_tokenizer(str(folder.path), tmp_path / "tokenizer", TOKENS)
    with pytest.raises(
        PretrainedError, match=r"the tokenizer pads with id 1 but config\.json's pad_token_id is 3"
    ):
        check_inputs(load_classifier(folder), folder, tokenizer_dir, TOKENS)


def test_a_max_length_beyond_the_model_s_positions_is_refused(
    text_classifier_folders, tmp_path: Path
) -> None:
    folder = read_folder(text_classifier_folders["bert"])
    tokenizer_dir = save_tokenizer(str(folder.path), tmp_path / "tokenizer", 2 * TOKENS)
    with pytest.raises(PretrainedError, match=f"cannot take {2 * TOKENS} tokens .*: set max_length lower"):
        check_inputs(load_classifier(folder), folder, tokenizer_dir, 2 * TOKENS)
