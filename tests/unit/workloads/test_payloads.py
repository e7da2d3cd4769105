"""What the load generator sends: image and text payload pools."""

from __future__ import annotations

import io
import json

from PIL import Image

from batchkit.images import IMAGE_INPUTS
from batchkit.protocols import Protocol, parse_request
from batchkit.text import TEXT_INPUTS
from tsbatch.workloads import payloads


def test_image_pool_varies_size_format_and_kind() -> None:
    pool = payloads.image_pool(seed=1, sides=(32, 256, 1024))
    assert len(pool) == 6
    decoded = [Image.open(io.BytesIO(p.body)) for p in pool]
    assert {img.format for img in decoded} == {"PNG", "JPEG", "WEBP"}
    assert {p.content_type for p in pool} == {"image/png", "image/jpeg", "image/webp"}
    assert max(max(img.size) for img in decoded) == 1024 and min(max(img.size) for img in decoded) == 32
    assert {p.description.split()[0] for p in pool} == {"digit", "photo"}
    assert [p.body for p in payloads.image_pool(seed=1, sides=(32,))] == [p.body for p in pool[:2]]


def test_text_pool_sends_plain_and_json_and_adds_long_utterances() -> None:
    texts = ["freeze my card", "where is it, my card"]
    pool = payloads.text_pool(texts * 20, seed=0, json_share=0.5)
    as_json = [json.loads(p.body)["text"] for p in pool if p.content_type == "application/json"]
    plain = [p.body.decode() for p in pool if p.content_type.startswith("text/plain")]
    assert as_json and plain
    assert set(as_json) <= set(texts)
    assert max(len(text) for text in plain) > 6 * len("freeze my card")  # joined, past max_length


def test_multi_input_pools_rotate_protocols_that_the_handlers_parse() -> None:
    images = payloads.image_pool(seed=0, sides=(32, 48))
    texts = payloads.text_pool(["freeze my card", "hi there", "what is my balance"], seed=0, json_share=0.5)
    for pool, schema in ((images, IMAGE_INPUTS), (texts, TEXT_INPUTS)):
        requests = payloads.multi_input_pool(pool, per_request=3)
        protocols = [
            parse_request({"body": json.loads(r.body)}, schema, 8, "m").protocol for r in requests[:3]
        ]
        assert protocols == [Protocol.LIST, Protocol.KSERVE_V1, Protocol.KSERVE_V2]
        for request in requests:
            parsed = parse_request({"body": json.loads(request.body)}, schema, 8, "m")
            assert len(parsed.inputs) == 3 and request.content_type == "application/json"
    first = parse_request(
        {"body": json.loads(payloads.multi_input_pool(texts, 2)[0].body)}, TEXT_INPUTS, 8, "m"
    )
    assert [value["text"] for value in first.inputs] == [payloads.input_value(p) for p in texts[:2]]
