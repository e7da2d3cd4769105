"""Reduced-size JPEG decoding through a real TorchServe: the archive repackaged with
``reducedDecode: on``; each kind of JPEG people send (EXIF-rotated, CMYK, progressive,
grey, 48 MP, truncated) sent in one batch, each answered with the label the reference
decoding of the same picture gets (its lossless PNG, which is never reduced), and the
truncated one a clear 400 while its batch-mates are answered."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from PIL import Image

from tsbatch.archive.package import private_store
from tsbatch.kinds.image.examples import jpeg, photo
from tsbatch.server.process import TorchServe
from tsbatch.server.served import served_decision

MODEL = "resnet18"


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def exif_rotated(image: Image.Image) -> bytes:
    """``image`` stored sideways with EXIF orientation 6: shown upright, it is ``image``."""
    exif = Image.Image().getexif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    image.transpose(Image.Transpose.ROTATE_90).save(buffer, format="JPEG", quality=90, exif=exif)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def reduced_server(start_server, model_store: Path, tmp_path_factory) -> TorchServe:
    work = tmp_path_factory.mktemp("reduced-decode")
    # A long delay, so the concurrent requests share batches; the PIL path, where JPEGs reduce.
    forced = {MODEL: {"reducedDecode": "on", "decodePath": "pil", "batchSize": 8, "maxBatchDelay": 300}}
    properties, store = private_store(work / "serve", [MODEL], forced)
    return start_server(store, [MODEL], source=properties)


def post(server: TorchServe, body: bytes) -> requests.Response:
    return requests.post(
        f"{server.url('inference')}/predictions/{MODEL}",
        data=body,
        headers={**server.client.headers(), "Content-Type": "application/octet-stream"},
        timeout=120,
    )


def test_every_kind_of_jpeg_is_answered_as_the_reference_decoding_answers(reduced_server) -> None:
    assert served_decision(reduced_server, MODEL)["reduced_decode"] is True
    picture = photo(0, 2400, 1800)
    big = photo(1, 8000, 6000)  # 48 MP: over the 40 MP limit at full size, 0.75 MP at 1/8
    plain = jpeg(picture)
    bodies = {
        "progressive": jpeg(picture, progressive=True),
        "grey": jpeg(picture.convert("L")),
        "cmyk": jpeg(picture.convert("CMYK")),
        "exif-rotated": exif_rotated(picture),
        "48mp": jpeg(big, quality=75),  # under the 4 MiB body limit
        "truncated": plain[: len(plain) // 3],
        "reference": png(picture),
        "reference-grey": png(picture.convert("L")),
    }
    big_reference = png(big.resize((2000, 1500), Image.Resampling.LANCZOS))
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        answers = dict(
            zip(bodies, pool.map(lambda body: post(reduced_server, body), bodies.values()), strict=True)
        )
    statuses = {name: response.status_code for name, response in answers.items()}
    assert statuses == {**dict.fromkeys(bodies, 200), "truncated": 400}, {
        n: r.text[:200] for n, r in answers.items()
    }
    assert "truncated or corrupt" in answers["truncated"].json()["error"]["message"]

    def top1(response: requests.Response) -> int:
        return response.json()["predictions"][0]["index"]

    reference = top1(answers["reference"])
    for name in ("progressive", "cmyk", "exif-rotated"):
        assert top1(answers[name]) == reference, name
    assert top1(answers["grey"]) == top1(answers["reference-grey"])
    assert top1(answers["48mp"]) == top1(post(reduced_server, big_reference))


def jpeg_claiming(width: int, height: int) -> bytes:
    """A small JPEG whose header claims ``width`` x ``height``: a bomb's body, refused from
    its header before any pixel is decoded."""
    raw = bytearray(jpeg(Image.new("RGB", (16, 16), (40, 120, 200))))
    frame = raw.index(b"\xff\xc0")  # baseline frame header: length, precision, height, width
    raw[frame + 5 : frame + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(raw)


def test_a_jpeg_over_the_limit_even_at_one_eighth_and_a_png_bomb_get_413(reduced_server) -> None:
    jpeg_bomb = jpeg_claiming(65_000, 65_000)  # 8125x8125 = 66 MP even at 1/8
    png_bomb = png(Image.new("L", (8000, 6000)))  # 48 MP of PNG: no DCT scale to decode it at
    good = jpeg(photo(2, 640, 480))
    with ThreadPoolExecutor(max_workers=3) as pool:
        responses = list(pool.map(lambda body: post(reduced_server, body), [jpeg_bomb, png_bomb, good]))
    assert [r.status_code for r in responses] == [413, 413, 200], [r.text[:200] for r in responses]
    # Past 2 x PIL's own bomb bound (179 MP) PIL refuses it at open; nearer, ``reduce_jpeg``
    # says "even decoded at 1/8" (tests/unit/handlers/image_serving/test_reduced.py).
    assert "4225000000 pixels" in responses[0].json()["error"]["message"]
    assert "8000x6000 = 48000000 pixels; the limit is" in responses[1].json()["error"]["message"]


def test_auto_decodes_big_photos_side_by_side_and_small_ones_inline(reduced_server) -> None:
    """decodeThreads auto (config.properties' default): a batch of 12 MP photos is decoded on
    the worker's cores, a batch of 224x224 pictures inline; the worker counts its batches."""
    from image_serving.pool import worker_cores

    def batches() -> dict[str, int]:
        decision = served_decision(reduced_server, MODEL)
        assert (decision["decode_threads"], decision["decode_cores"]) == ("auto", worker_cores())
        return decision["decode_batches_by_threads"]

    before = batches()
    big = [jpeg(photo(index, 4032, 3024)) for index in range(4)]
    with ThreadPoolExecutor(max_workers=len(big)) as pool:
        answers = list(pool.map(lambda body: post(reduced_server, body), big))
    assert [r.status_code for r in answers] == [200] * len(big), [r.text[:200] for r in answers]
    after_big = batches()
    pooled = {k: v - before.get(k, 0) for k, v in after_big.items() if v != before.get(k, 0)}
    assert max(int(k) for k in pooled) == min(2, worker_cores()), pooled  # the 300 ms delay batches them

    small = [jpeg(photo(index, 224, 224)) for index in range(4)]
    with ThreadPoolExecutor(max_workers=len(small)) as pool:
        answers = list(pool.map(lambda body: post(reduced_server, body), small))
    assert [r.status_code for r in answers] == [200] * len(small)
    inline = {k: v - after_big.get(k, 0) for k, v in batches().items() if v != after_big.get(k, 0)}
    assert set(inline) == {"1"}, inline
