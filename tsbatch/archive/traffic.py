"""What a load generator sends to one model in a run and how it judges the answers: the one
lookup (:func:`traffic_for`) the Locust scenario, the tuner and the benchmarks go through.

A model with ``--requests`` gets those bodies and, by default, only a 2xx check (its answers
are the user's, not ours); ``--answer-schema FILE`` validates each answer against a JSON
Schema, ``--answer-schema toolkit`` against the toolkit's own answer checks. A manifest
model without ``--requests`` keeps the toolkit's pools and checks, several-input bodies
included. Any other model cannot be loaded: nothing says what it takes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from jsonschema import SchemaError, validators

from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.workloads.payloads import Payload
from tsbatch.workloads.requests_files import RequestsError, read_requests
from tsbatch.workloads.schemas import body_problems, error_detail
from tsbatch.workloads.workload import AnswerCheck, Workload

# The problems of one HTTP answer (status and body), empty when it passes.
ResponseCheck = Callable[[int, bytes | None], list[str]]
TOOLKIT_SCHEMA = "toolkit"  # --answer-schema value: the toolkit's own answer checks


@dataclass(frozen=True)
class Traffic:
    """One model's request bodies in a run and the check every answer must pass."""

    model: str
    payloads: list[Payload]
    check: ResponseCheck
    # The kind's workload where the toolkit's several-input bodies apply (its own handlers
    # read them); None for the user's requests, sent as they are.
    workload: Workload | None
    source: str  # where the bodies come from, for logs

    @property
    def several_inputs(self) -> bool:
        return self.workload is not None

    @property
    def input_check(self) -> AnswerCheck | None:
        """The kind's check of one input's answer, where several-input bodies apply."""
        return None if self.workload is None else self.workload.answer_check(self.model)

    def problem(self, status: int, body: bytes | None) -> str | None:
        """The answer's first problems as one text, ``None`` when it passed (the load client's check)."""
        problems = self.check(status, body)
        return "; ".join(problems[:2]) if problems else None


def status_problems(status: int, content: bytes | None) -> list[str]:
    """The check for the user's traffic: any 2xx answer passes."""
    return [] if 200 <= status < 300 else [f"HTTP {status}{error_detail(content)}"]


def schema_check(path: Path) -> ResponseCheck:
    """A 2xx answer whose JSON body validates against the JSON Schema in ``path``."""
    try:
        schema = json.loads(path.read_text())
        validator_class = validators.validator_for(schema)
        validator_class.check_schema(schema)
    except (OSError, ValueError) as exc:
        raise RequestsError(f"--answer-schema {path}: not a readable JSON document ({exc})") from None
    except SchemaError as exc:
        raise RequestsError(f"--answer-schema {path}: not a valid JSON Schema ({exc.message})") from None
    validator = validator_class(schema)

    def check(status: int, content: bytes | None) -> list[str]:
        problems = status_problems(status, content)
        if problems:
            return problems
        try:
            body = json.loads(content or b"")
        except ValueError:
            return ["body is not JSON (the answer schema expects JSON)"]
        return [
            f"{'/'.join(str(part) for part in error.absolute_path) or 'body'}: {error.message}"
            for error in validator.iter_errors(body)
        ]

    return check


def answer_check(model: str, answer_schema: str, manifest: Manifest | None = None) -> ResponseCheck:
    """The check ``--answer-schema`` asks for: empty -> 2xx, ``toolkit`` -> the model's kind's
    (models.yaml), else a schema file."""
    if not answer_schema:
        return status_problems
    if answer_schema == TOOLKIT_SCHEMA:
        kind_check = (manifest or load_manifest()).kind_of(model).workload.answer_check(model)
        return lambda status, content: body_problems(status, content, kind_check)
    return schema_check(Path(answer_schema))


def unknown_models(
    models: Iterable[str], requests: Mapping[str, Path], manifest: Manifest | None = None
) -> list[str]:
    """The models with neither ``--requests`` nor a manifest entry: nothing says what to send them."""
    known = set((manifest or load_manifest()).models)
    return [model for model in models if model not in requests and model not in known]


def unknown_models_message(unknown: list[str]) -> str:
    return (
        f"no requests for {unknown}: give each its request bodies with --requests MODEL=PATH "
        "(a folder of files or a .jsonl file, see docs/loadtest.md)"
    )


def traffic_for(
    model: str,
    seed: int = 0,
    requests: Path | None = None,
    answer_schema: str = "",
    manifest: Manifest | None = None,
) -> Traffic:
    """The user's requests when given, else the toolkit's pool for the manifest model's kind."""
    if requests is not None:
        return Traffic(
            model,
            read_requests(requests),
            answer_check(model, answer_schema, manifest),
            None,
            f"requests from {requests}",
        )
    manifest = manifest or load_manifest()
    if model not in manifest.models:
        raise RequestsError(unknown_models_message([model]))
    kind = manifest.kind_of(model)
    check = answer_check(model, answer_schema or TOOLKIT_SCHEMA, manifest)
    return Traffic(model, kind.workload.pool(seed), check, kind.workload, f"the toolkit's {kind.name} pool")
