"""Benchmark: ``tsbatch apply`` where it is hardest, failures per run and the stall it causes.

The image model at two workers and batchSize 16 serves camera photos (6000x6000 JPEGs by
default, about 200 ms of decode each) to 24 clients; a text model beside it serves a few
clients of its own. Then ``tsbatch apply --batch-size 15|16|15...`` runs ``--runs`` times in a
row, each as the installed command in its own process. Per run: the image requests that were
not answered 200 (failed or never answered) among those sent from the apply's start to its
end, how long the apply took, and the worst latency of the text model's clients meanwhile.

``--apply-from DIR`` runs the apply of another checkout (its ``tsbatch`` package on the path),
so the same server and load measure a baseline in the same sitting:

    git archive main | tar -x -C /tmp/main-apply
    tsbatch bench apply --apply-from /tmp/main-apply --runs 5   # before
    tsbatch bench apply --runs 5                                # after
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.package import private_store
from tsbatch.client.load import BackgroundLoad, LoadDriver, Record
from tsbatch.kinds.image.examples import photo_jpegs
from tsbatch.paths import REPO_ROOT
from tsbatch.server.process import TorchServe, start_instance
from tsbatch.settings.batch import BatchSettings

TEXT_BODY = b"turn on the lights in the kitchen"


def load(
    server: TorchServe, model: str, bodies: list[bytes], content_type: str, clients: int
) -> BackgroundLoad:
    driver = LoadDriver(
        f"{server.url('inference')}/predictions/{model}",
        bodies,
        content_types=content_type,
        headers=server.client.headers("inference"),
        request_timeout_s=120,
    )
    return BackgroundLoad(driver, clients)


def one_apply(server: TorchServe, model: str, batch_size: int, apply_from: Path | None) -> tuple[int, str]:
    env = dict(os.environ)
    if apply_from is not None:
        env.update(PYTHONPATH=str(apply_from), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "tsbatch", "apply", "--model", model, "--batch-size", str(batch_size),
               "--run-dir", str(server.run_dir), "--no-properties"]  # fmt: skip
    done = subprocess.run(command, cwd=apply_from or REPO_ROOT, env=env, capture_output=True, text=True)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else ""


def during(records: list[Record], begin: float, end: float) -> list[Record]:
    """The requests in flight at some moment of [begin, end]."""
    return [r for r in records if r.start <= end and r.finished >= begin]


def not_answered(records: list[Record], begin: float, end: float) -> int:
    return sum(1 for r in during(records, begin, end) if r.status != 200)


def worst_ms(records: list[Record], begin: float, end: float) -> float:
    return max(((r.response_time_ms or 0.0) for r in during(records, begin, end)), default=0.0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Serve the image model at two workers to 24 clients of 6000x6000 photos, a text model beside "
        "it, and apply batch sizes 15 and 16 in turn: per run, the image requests not answered 200 and the text "
        "clients' worst latency. --apply-from runs another checkout's apply (the baseline)."
    )
    parser.add_argument("--image-model", default="resnet18", help="the model applied (default resnet18)")
    parser.add_argument(
        "--text-model", default="bert_intent", help="the model whose clients watch (default bert_intent)"
    )
    parser.add_argument(
        "--photo", default="6000x6000", help="WIDTHxHEIGHT of the JPEGs sent (default 6000x6000)"
    )
    parser.add_argument("--clients", type=int, default=24, help="image clients (default 24)")
    parser.add_argument("--text-clients", type=int, default=6, help="text clients (default 6)")
    parser.add_argument("--runs", type=int, default=5, help="applies in a row (default 5)")
    parser.add_argument("--apply-from", type=Path, help="a checkout whose apply to run (the baseline)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    width, height = (int(side) for side in args.photo.split("x"))
    photos = photo_jpegs(width, height, count=4)
    two_workers = BatchSettings.for_point(16, 10, 2).entry()
    models = [args.image_model, args.text_model]
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as work:
        properties, store = private_store(Path(work) / "store", models, changes={args.image_model: two_workers},
                                          manifest=load_manifest())  # fmt: skip
        size = max(len(body) for body in photos) * 2
        server = start_instance(Path(work) / "run", store, models, source=properties,
                                overrides={"enable_model_api": "true", "max_request_size": str(size)})  # fmt: skip
        print(f"apply from {args.apply_from or REPO_ROOT}; {args.clients} clients of {args.image_model} "
              f"({args.photo} JPEGs, {len(photos[0]) / 1e6:.1f} MB), {args.text_clients} of {args.text_model}")  # fmt: skip
        print("run | exit | apply s | image requests in flight | not answered 200 | worst text latency ms")
        try:
            images = load(server, args.image_model, photos, "image/jpeg", args.clients)
            texts = load(server, args.text_model, [TEXT_BODY], "text/plain", args.text_clients)
            with images, texts:
                time.sleep(10)
                for run in range(1, args.runs + 1):
                    begin = time.time()
                    code, last = one_apply(server, args.image_model, 15 if run % 2 else 16, args.apply_from)
                    end = time.time()
                    time.sleep(3)
                    sent = len(during(images.records, begin, end))
                    print(f"{run} | {code} | {end - begin:.1f} | {sent} | "
                          f"{not_answered(images.records, begin, end)} | {worst_ms(texts.records, begin, end):.0f}"
                          + ("" if code == 0 else f" | {last}"), flush=True)  # fmt: skip
            total = not_answered(images.records, 0, time.time())
            print(f"all image requests: {len(images.records)}, not answered 200: {total}")
        finally:
            server.stop()
    return 0
