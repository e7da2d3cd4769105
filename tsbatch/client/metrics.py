"""Reading TorchServe's Prometheus text (the metrics port's ``/metrics``): the one parser.

The tuner, the process helper's settled counters and the tests all read counters such as
``BatchesTotal{ModelName="resnet18",Level="Model",Hostname="vm",} 20.0`` from it; parsing
every sample into name, labels and value here (instead of a regex per caller) keeps label
order, TorchServe's trailing comma and escaped label values from mattering anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from tsbatch.sla.server import counter_rise

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[A-Za-z_][A-Za-z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")
# The handlers' metrics name the model ``ModelName``; TorchServe's own ``ts_*`` ones ``model_name``.
MODEL_LABELS = ("ModelName", "model_name")


@dataclass(frozen=True)
class MetricSample:
    """One sample line: ``name{labels} value`` (a timestamp after the value is ignored)."""

    name: str
    labels: dict[str, str]
    value: float


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda match: "\n" if match.group(1) == "n" else match.group(1), value)


def parse_samples(metrics_text: str) -> Iterator[MetricSample]:
    """Every sample of the text, in order; comments (``# HELP``, ``# TYPE``) and blank lines skipped."""
    for line in metrics_text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = {
            label.group("key"): _unescape(label.group("value"))
            for label in _LABEL.finditer(match.group("labels") or "")
        }
        yield MetricSample(match.group("name"), labels, float(match.group("value")))


def sample_model(sample: MetricSample) -> str | None:
    """The model a sample belongs to, whichever of TorchServe's two model labels it carries."""
    return next((sample.labels[key] for key in MODEL_LABELS if key in sample.labels), None)


def counters_by_model(
    metrics_text: str, models: Sequence[str], names: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Each named counter of each model, summed over the model's series, in one pass. A counter
    the text does not carry is left out (a handler that never emits it is not one that says 0)."""
    wanted = set(names)
    totals: dict[str, dict[str, float]] = {model: {} for model in models}
    for sample in parse_samples(metrics_text):
        per_model = totals.get(sample_model(sample) or "")
        if per_model is not None and sample.name in wanted:
            per_model[sample.name] = per_model.get(sample.name, 0.0) + sample.value
    return totals


def model_counters(metrics_text: str, model: str, names: Sequence[str]) -> dict[str, float]:
    """Each named counter summed over every series of ``model`` (0 when absent)."""
    present = counters_by_model(metrics_text, [model], names)[model]
    return {name: present.get(name, 0.0) for name in names}


def rise_ratio(
    before: Mapping[str, float], after: Mapping[str, float], numerator: str, denominator: str
) -> float | None:
    """The rise of one counter per rise of another between two scrapes (mean batch size:
    BatchedRequestsTotal per BatchesTotal); None when the denominator did not rise."""
    below = counter_rise(before.get(denominator, 0.0), after.get(denominator, 0.0))
    if below <= 0:
        return None
    return counter_rise(before.get(numerator, 0.0), after.get(numerator, 0.0)) / below


def mean_formed_batch(before_text: str, after_text: str, model: str) -> float | None:
    """Mean batch size the frontend actually formed between two scrapes. None when no batch ran."""
    names = ["BatchesTotal", "BatchedRequestsTotal"]
    before, after = model_counters(before_text, model, names), model_counters(after_text, model, names)
    return rise_ratio(before, after, "BatchedRequestsTotal", "BatchesTotal")
