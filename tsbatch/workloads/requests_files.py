"""The user's own request bodies (``--requests``), for models the toolkit did not build.

Two sources, each read once into :class:`~tsbatch.workloads.payloads.Payload` s sent as they
are (one input per request, no envelope of ours):

- a folder: every file (sorted, hidden ones skipped) is one body, its Content-Type from the
  extension (:data:`CONTENT_TYPES`, anything else ``application/octet-stream``);
- a ``.jsonl`` file: every non-blank line is one request. A line that is a JSON object whose
  keys are one of :data:`BODY_KEYS` plus an optional ``content_type`` names the body:

  - ``{"text": "..."}``: the text, ``text/plain; charset=utf-8``;
  - ``{"json": <any JSON>}``: that JSON, ``application/json``;
  - ``{"base64": "...", "content_type": "image/jpeg"}``: the decoded bytes;
  - ``{"file": "path"}``: the file's bytes (a relative path is read beside the .jsonl),
    typed from its extension;

  ``content_type`` overrides the type of any of them. Any other JSON line (an object with
  other keys, an array, a string, a number) is itself the body, sent as ``application/json``.
  To send the JSON object ``{"text": "..."}`` as it is, wrap it: ``{"json": {"text": "..."}}``.

A mistake is a :class:`RequestsError` naming the file and line, read before any load is sent.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tsbatch.workloads.payloads import Payload

CONTENT_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".gif": "image/gif",
    ".bmp": "image/bmp",
    ".webp": "image/webp",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}
DEFAULT_CONTENT_TYPE = "application/octet-stream"
BODY_KEYS = ("text", "json", "base64", "file")
CONTENT_TYPE_KEY = "content_type"


def add_requests_options(parser: Any) -> None:
    """``--requests`` and ``--answer-schema``, for the load test, the tuner and the benchmark."""
    parser.add_argument(  # default None: Locust's web form turns an empty list default into ints
        "--requests",
        action="append",
        default=None,
        help="request bodies: PATH (the one model under test) or MODEL=PATH (repeat per model), "
        "a folder of files or a .jsonl (docs/loadtest.md, 'Your models')",
    )
    parser.add_argument(
        "--answer-schema",
        default="",
        help="check the --requests answers: a JSON Schema file, or 'toolkit' (default: any 2xx passes)",
    )


class RequestsError(ValueError):
    """A ``--requests`` source or spec cannot be used; the message says where and what to do."""


def content_type_for(path: Path) -> str:
    return CONTENT_TYPES.get(path.suffix.lower(), DEFAULT_CONTENT_TYPE)


def read_requests(path: Path) -> list[Payload]:
    """Every request of a folder or a ``.jsonl`` file, in order."""
    if path.is_dir():
        payloads = folder_requests(path)
    elif path.suffix.lower() == ".jsonl" and path.is_file():
        payloads = jsonl_requests(path)
    elif path.exists():
        raise RequestsError(f"--requests {path}: give a folder of request bodies or a .jsonl file")
    else:
        raise RequestsError(f"--requests {path}: no such file or folder")
    if not payloads:
        raise RequestsError(f"--requests {path}: no requests in it")
    return payloads


def folder_requests(folder: Path) -> list[Payload]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    return [Payload(p.read_bytes(), content_type_for(p), p.name) for p in files]


def jsonl_requests(path: Path) -> list[Payload]:
    payloads = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            document = json.loads(line)
        except ValueError as exc:
            raise RequestsError(f"{where}: not JSON ({exc}); each line is one request") from None
        payloads.append(line_payload(document, where, path.parent))
    return payloads


def is_description(document: Any) -> bool:
    """Whether a JSON line names its body (one of ``BODY_KEYS``) rather than being the body."""
    if not isinstance(document, dict) or not document:
        return False
    keys = set(document)
    return bool(keys & set(BODY_KEYS)) and keys <= {*BODY_KEYS, CONTENT_TYPE_KEY}


def line_payload(document: Any, where: str, base: Path) -> Payload:
    """One ``.jsonl`` line as a request: a body description, or the JSON body itself."""
    if not is_description(document):
        return Payload(json.dumps(document).encode(), "application/json", f"{where} json")
    named = [key for key in BODY_KEYS if key in document]
    if len(named) > 1:
        raise RequestsError(f"{where}: name one body ({' or '.join(BODY_KEYS)}), not {' and '.join(named)}")
    key = named[0]
    given_type = document.get(CONTENT_TYPE_KEY)
    if given_type is not None and (not isinstance(given_type, str) or not given_type.strip()):
        raise RequestsError(f"{where}: content_type must be a non-empty string")
    value = document[key]
    if key == "json":
        body, content_type = json.dumps(value).encode(), "application/json"
    elif not isinstance(value, str):
        raise RequestsError(f"{where}: {key!r} must be a string, not {type(value).__name__}")
    elif key == "text":
        body, content_type = value.encode("utf-8"), "text/plain; charset=utf-8"
    elif key == "base64":
        try:
            body = base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise RequestsError(f"{where}: 'base64' is not valid base64 ({exc})") from None
        content_type = DEFAULT_CONTENT_TYPE
    else:
        file = Path(value) if Path(value).is_absolute() else base / value
        if not file.is_file():
            raise RequestsError(f"{where}: 'file' {value!r} not found (relative paths start at {base})")
        body, content_type = file.read_bytes(), content_type_for(file)
    return Payload(body, given_type or content_type, f"{where} {key}")


def parse_requests_specs(
    values: Sequence[str] | str | None, single_model: str | None, models: Sequence[str] = ()
) -> dict[str, Path]:
    """``--requests`` values -> ``{model: path}``: ``MODEL=PATH`` names its model, a bare
    ``PATH`` is the one model under test (``--model``). Values may also be comma-separated
    (the web UI's form field is one such text). With ``models``, naming another is an error."""
    texts = [values] if isinstance(values, str) else list(values or [])
    specs: dict[str, Path] = {}
    for value in (part.strip() for raw in texts for part in raw.split(",")):
        if not value:
            continue
        model, sep, path = value.partition("=")
        if not sep:
            if not single_model:
                raise RequestsError(
                    f"--requests {value}: which model's? give MODEL={value}, or --model NAME for one model"
                )
            model, path = single_model, value
        model, path = model.strip(), path.strip()
        if not model or not path:
            raise RequestsError(f"--requests {value!r}: expected MODEL=PATH")
        if model in specs:
            raise RequestsError(f"--requests: {model} given twice")
        specs[model] = Path(path).expanduser()
    strays = sorted(set(specs) - set(models)) if models else []
    if strays:
        raise RequestsError(
            f"--requests for {strays}, which this run leaves out (it has {', '.join(models)})"
        )
    return specs
