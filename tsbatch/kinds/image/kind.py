"""The image classifier kind (``kind: image``): a torchvision ResNet behind handlers/image_classifier_handler.py."""

from __future__ import annotations

from pathlib import Path

from batchkit.protocols import InputSchema
from image_serving.config import ImageModelConfig
from image_serving.pool import AUTO, decode_threads_problem
from image_serving.reduced import REDUCED_DECODE
from tsbatch.archive.kind import Exporter, Kind, SweptModels, TakesOptions
from tsbatch.config.bodies import base64_body, base64_ceiling
from tsbatch.config.findings import Problem
from tsbatch.kinds.image import workload
from tsbatch.kinds.image.schema import ImageModel
from tsbatch.paths import HANDLERS_DIR
from tsbatch.settings.batch import WorkerKey

DECODE_PATHS = ("auto", "pil", "tensor")


def decode_path_problem(path: object) -> str | None:
    return None if path in DECODE_PATHS else f"must be one of {', '.join(DECODE_PATHS)}, got {path!r}"


def reduced_decode_problem(setting: object) -> str | None:
    if setting in REDUCED_DECODE:
        return None
    return f"must be one of {', '.join(REDUCED_DECODE)}, got {setting!r}"


# The worker's decode pool and JPEG decoding (config.properties; absent: threads chosen per
# batch, the auto path, and reduced-size JPEG decoding where the build's gate passed).
DECODE_KEYS = (
    WorkerKey("decodeThreads", "decode_threads", AUTO, decode_threads_problem, "decode pool", threads=True),
    WorkerKey("decodePath", "decode_path", "auto", decode_path_problem, "decode pool"),
    WorkerKey("reducedDecode", "reduced_decode", "auto", reduced_decode_problem, "JPEG decoder"),
)


def input_schema() -> InputSchema:
    from image_serving.images import IMAGE_INPUTS  # imported here: images pulls in torch

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


def export_options(parser: TakesOptions) -> None:
    """``tsbatch export``'s options for an image model: your weights instead of the entry's."""
    parser.add_argument(
        "--weights", type=Path, help="state_dict, TorchScript artifact or torch.export program (.pt2)"
    )
    parser.add_argument("--labels", type=Path, help="labels file for --weights")


# The build and the sweep, each importing its module only when called: they pull in torchvision and scikit-learn
# that the load generators, which import this record, never need.
def exporter() -> Exporter:
    from tsbatch.kinds.image import export

    return export


def swept_models() -> SweptModels:
    from tsbatch.kinds.image import sweep

    return sweep


IMAGE = Kind(
    name="image",
    entry=ImageModel,
    config=ImageModelConfig,
    handler="handlers/image_classifier_handler.py",
    handler_modules=(HANDLERS_DIR / "image_serving",),  # its decoding, config and errors
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
            "reduced_decode",
            "reduced_decode_gate",
        }
    ),
    exporter=exporter,
    export_options=export_options,
    swept_models=swept_models,
    stand_in="imagenet",
    workload=workload.WORKLOAD,
    input_schema=input_schema,
    largest_answer=workload.largest_answer,
    limits=limits,
    worker_keys=DECODE_KEYS,
)
