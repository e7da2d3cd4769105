"""The user's request files: a folder of bodies or a .jsonl of requests, mistakes named by line."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from tsbatch.workloads.requests_files import RequestsError, parse_requests_specs, read_requests


def test_a_folder_sends_every_file_as_is_typed_by_its_extension(tmp_path: Path) -> None:
    for name, body in {
        "b.JPG": b"jpeg",
        "a.png": b"png",
        "c.json": b"{}",
        "d.txt": b"hi",
        "e.bin": b"x",
    }.items():
        (tmp_path / name).write_bytes(body)
    (tmp_path / ".hidden").write_bytes(b"skip")
    payloads = read_requests(tmp_path)
    assert [(p.body, p.content_type) for p in payloads] == [
        (b"png", "image/png"),
        (b"jpeg", "image/jpeg"),
        (b"{}", "application/json"),
        (b"hi", "text/plain; charset=utf-8"),
        (b"x", "application/octet-stream"),
    ]


def test_jsonl_lines_are_bodies_or_name_their_body(tmp_path: Path) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "cat.webp").write_bytes(b"webp")
    lines = [
        {"text": "book a flight"},
        {"json": {"text": "as is"}},
        {"base64": base64.b64encode(b"\x00\x01").decode(), "content_type": "image/jpeg"},
        {"file": "pics/cat.webp"},
        {"file": str(tmp_path / "pics" / "cat.webp"), "content_type": "application/x-custom"},
        {"inputs": [1, 2]},
        [1, 2],
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text(
        "\n".join(json.dumps(line) for line in lines[:3])
        + "\n\n"
        + "\n".join(json.dumps(line) for line in lines[3:])
    )
    payloads = read_requests(path)
    assert [(p.body, p.content_type) for p in payloads] == [
        (b"book a flight", "text/plain; charset=utf-8"),
        (b'{"text": "as is"}', "application/json"),
        (b"\x00\x01", "image/jpeg"),
        (b"webp", "image/webp"),
        (b"webp", "application/x-custom"),
        (b'{"inputs": [1, 2]}', "application/json"),
        (b"[1, 2]", "application/json"),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "requests.jsonl:2: not JSON"),
        (
            '{"text": "a", "file": "b"}',
            "requests.jsonl:2: name one body (text or json or base64 or file), not text and file",
        ),
        ('{"text": 3}', "requests.jsonl:2: 'text' must be a string, not int"),
        ('{"base64": "@@@"}', "requests.jsonl:2: 'base64' is not valid base64"),
        ('{"file": "missing.png"}', "requests.jsonl:2: 'file' 'missing.png' not found"),
        ('{"text": "a", "content_type": 5}', "requests.jsonl:2: content_type must be a non-empty string"),
    ],
)
def test_jsonl_mistakes_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text('{"text": "fine"}\n' + line + "\n")
    with pytest.raises(RequestsError, match=re.escape(message)):
        read_requests(path)


def test_unusable_sources_say_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(RequestsError, match="no such file or folder"):
        read_requests(tmp_path / "nope")
    with pytest.raises(RequestsError, match="no requests in it"):
        read_requests(tmp_path)
    (tmp_path / "one.csv").write_text("a,b")
    with pytest.raises(RequestsError, match=r"a folder of request bodies or a \.jsonl file"):
        read_requests(tmp_path / "one.csv")


def test_requests_specs_name_their_model_or_the_one_under_test() -> None:
    assert parse_requests_specs(["a=x/y", "b=z.jsonl"], None) == {"a": Path("x/y"), "b": Path("z.jsonl")}
    assert parse_requests_specs(["a=x,b=y"], None) == {"a": Path("x"), "b": Path("y")}
    assert parse_requests_specs(["pics"], "mobilenet") == {"mobilenet": Path("pics")}
    assert parse_requests_specs(["", " "], None) == parse_requests_specs(None, None) == {}
    assert parse_requests_specs("a=x", None) == {"a": Path("x")}  # the web UI's text field
    with pytest.raises(RequestsError, match="--model NAME"):
        parse_requests_specs(["pics"], None)
    with pytest.raises(RequestsError, match="given twice"):
        parse_requests_specs(["a=x", "a=y"], None)
    with pytest.raises(
        RequestsError, match=r"--requests for \['b'\], which this run leaves out \(it has a\)"
    ):
        parse_requests_specs(["a=x", "b=y"], None, ["a"])
    with pytest.raises(RequestsError, match="expected MODEL=PATH"):
        parse_requests_specs(["a="], None)
