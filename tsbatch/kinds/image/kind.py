"""The image classifier kind (``kind: image``): a torchvision ResNet behind handlers/image_classifier_handler.py."""

from __future__ import annotations

from batchkit.config import ImageModelConfig
from batchkit.protocols import InputSchema
from tsbatch.config.bodies import base64_body, base64_ceiling
from tsbatch.config.findings import Problem
from tsbatch.kinds.image import workload
from tsbatch.kinds.image.schema import ImageModel
from tsbatch.kinds.kind import Kind


def input_schema() -> InputSchema:
    from batchkit.images import IMAGE_INPUTS  # imported here: images pulls in torch

    return IMAGE_INPUTS


def limits(where: str, entry: ImageModel, request_limit: int) -> list[Problem]:
    """Images are often sent as base64 JSON: a third larger than the file itself."""
    body = base64_body(entry.max_body_bytes)
    if entry.max_body_bytes < request_limit < body:
        return [
            Problem(
                "warning",
                f"{where}.max_body_bytes",
                f"an image of {entry.max_body_bytes} bytes sent as base64 JSON takes {body} bytes, above "
                f"max_request_size {request_limit}: the frontend refuses it before the handler's 413. Lower "
                f"max_body_bytes to {base64_ceiling(request_limit)} (models.yaml) or raise max_request_size.",
            )
        ]
    return []


IMAGE = Kind(
    name="image",
    entry=ImageModel,
    config=ImageModelConfig,
    handler="handlers/image_classifier_handler.py",
    # What export resolves, and the decode settings packaging takes from config.properties.
    resolved=frozenset(
        {
            "weights",
            "resize_size",
            "crop_size",
            "mean",
            "std",
            "optimize_atol",
            "decode_threads",
            "decode_path",
        }
    ),
    exporter="tsbatch.kinds.image.export",
    sweep="tsbatch.kinds.image.sweep",
    stand_in="imagenet",
    workload=workload.WORKLOAD,
    input_schema=input_schema,
    largest_answer=workload.largest_answer,
    limits=limits,
)
