"""Photos as phones send them, against the shipped body limits (config.properties'
max_request_size, models.yaml's max_body_bytes) through a real TorchServe.

A 12 MP phone JPEG (6 MB and more) is answered as raw bytes, base64 JSON, multipart and
KServe v1/v2; a 48 MP one as raw bytes passes the byte limits. A body over the handler's
limit gets its 413 JSON naming the limit and one over the frontend's gets TorchServe's
413, while the requests sent beside them (batch-mates) are answered.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import requests
from PIL import Image

from tsbatch.config.properties import read_properties
from tsbatch.kinds.image.examples import jpeg, photo, photo_jpegs
from tsbatch.kinds.image.workload import answer_problems
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.server.process import TorchServe

MODEL = "resnet18"
PHONE_BYTES = 6_000_000  # the 6.0 MB JPEG, refused by the old 4 MiB limit


@pytest.fixture(scope="module")
def server(torchserve: TorchServe) -> TorchServe:
    """The session's instance: the repository's archives with the shipped limits."""
    return torchserve


@pytest.fixture(scope="module")
def phone_photo() -> bytes:
    """A real 12 MP photo with a sensor's noise, at a phone's JPEG quality: 6-8 MB."""
    pixels = np.asarray(photo(0, 4032, 3024)).astype(np.float32)
    noisy = pixels + np.random.default_rng(0).normal(0, 11, pixels.shape)
    body = jpeg(Image.fromarray(noisy.clip(0, 255).astype(np.uint8)), quality=95)
    assert PHONE_BYTES <= len(body) <= 8_500_000, len(body)
    return body


def post(server: TorchServe, path: str, **kwargs: Any) -> requests.Response:
    with requests.Session() as session:  # one connection per call: the calls run side by side
        headers = {**server.client.headers("inference"), **kwargs.pop("headers", {})}
        return session.post(f"{server.url('inference')}{path}", headers=headers, timeout=180, **kwargs)


def raw(server: TorchServe, body: bytes) -> requests.Response:
    return post(
        server, f"/predictions/{MODEL}", data=body, headers={"Content-Type": "application/octet-stream"}
    )


def test_phone_photos_in_every_body_form_beside_bodies_over_each_limit(
    server: TorchServe, phone_photo: bytes
) -> None:
    request_limit = int(read_properties(DEFAULT_PROPERTIES)["max_request_size"])
    encoded = base64.b64encode(phone_photo).decode()
    (big,) = photo_jpegs(8000, 6000, 1)
    v2 = {"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": [encoded]}]}
    calls: dict[str, Callable[[], requests.Response]] = {
        "raw": lambda: raw(server, phone_photo),
        "base64": lambda: post(server, f"/predictions/{MODEL}", json={"image": encoded}),
        "multipart": lambda: post(server, f"/predictions/{MODEL}", files={"photo": phone_photo}),
        "v1": lambda: post(server, f"/v1/models/{MODEL}:predict", json={"instances": [{"b64": encoded}]}),
        "v2": lambda: post(server, f"/v2/models/{MODEL}/infer", json=v2),
        "48mp_raw": lambda: raw(server, big),
        "over_handler_limit": lambda: raw(server, phone_photo.ljust(16 * 1024 * 1024 + 1, b"\0")),
        "over_request_limit": lambda: raw(server, b"\xff" * (request_limit + 1)),
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        responses = {name: future.result() for name, future in futures.items()}
    statuses = {name: response.status_code for name, response in responses.items()}
    answered = ("raw", "base64", "multipart", "v1", "v2")
    assert {name: statuses[name] for name in answered} == dict.fromkeys(answered, 200), {
        name: responses[name].text[:300] for name in answered
    }
    assert answer_problems(responses["raw"].json(), MODEL) == []
    assert answer_problems(responses["base64"].json(), MODEL) == []
    assert answer_problems(responses["multipart"].json(), MODEL) == []
    assert answer_problems(responses["v1"].json()["predictions"][0], MODEL) == []
    assert answer_problems(json.loads(responses["v2"].json()["outputs"][0]["data"][0]), MODEL) == []

    over = responses["over_handler_limit"]
    assert over.status_code == 413, over.text
    error = over.json()["error"]
    assert "the limit is 16777216" in error["message"], error  # the handler's, naming its limit
    frontend = responses["over_request_limit"]
    # Netty refuses it before any handler runs: no body to explain (docs/api.md says so).
    assert (frontend.status_code, frontend.content) == (413, b""), frontend.text[:300]
    # The 48 MP photo passes the byte limits; its pixels are the image-bomb limit's to judge.
    big_answer = responses["48mp_raw"]
    assert big_answer.status_code == 200 or "pixels" in big_answer.json()["error"]["message"], big_answer.text
