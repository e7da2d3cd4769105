"""Several inputs to a request: each kind's pool packed in every envelope the handlers parse."""

from __future__ import annotations

import json

from batchkit.protocols import Protocol, parse_request
from image_serving.images import IMAGE_INPUTS
from text_serving.text import TEXT_INPUTS
from tsbatch.kinds.image.workload import WORKLOAD as IMAGES
from tsbatch.kinds.image.workload import image_pool
from tsbatch.kinds.text.workload import WORKLOAD as TEXTS
from tsbatch.kinds.text.workload import text_pool
from tsbatch.workloads import payloads


def test_multi_input_pools_rotate_protocols_that_the_handlers_parse() -> None:
    images = image_pool(seed=0, sides=(32, 48))
    texts = text_pool(["freeze my card", "hi there", "what is my balance"], seed=0, json_share=0.5)
    for pool, workload, schema in ((images, IMAGES, IMAGE_INPUTS), (texts, TEXTS, TEXT_INPUTS)):
        requests = workload.multi_input_pool(pool, per_request=3)
        protocols = [
            parse_request({"body": json.loads(r.body)}, schema, 8, "m").protocol for r in requests[:3]
        ]
        assert protocols == [Protocol.LIST, Protocol.KSERVE_V1, Protocol.KSERVE_V2]
        for request in requests:
            parsed = parse_request({"body": json.loads(request.body)}, schema, 8, "m")
            assert len(parsed.inputs) == 3 and request.content_type == "application/json"
    first = parse_request({"body": json.loads(TEXTS.multi_input_pool(texts, 2)[0].body)}, TEXT_INPUTS, 8, "m")
    assert [value["text"] for value in first.inputs] == [TEXTS.input_value(p) for p in texts[:2]]


def test_a_body_names_its_list_by_the_key_it_is_given() -> None:
    body = json.loads(payloads.multi_input_body(["a", "b"], "things", "list"))
    assert body == {"things": ["a", "b"]}
