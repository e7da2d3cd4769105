"""Measure one configuration of one model: package it, serve it, load it, read the figures.

Every setting tried gets its own archive (TorchServe lets the archive's model-config.yaml
win over config.properties, so the setting must be packaged in). One private TorchServe per
model's search, on free loopback ports with token auth on, serves them in turn: started with
the first point's archive, it then has each later point's archive registered in place of the
one before, so every point gets fresh workers without a JVM start of seconds (as Triton's
Model Analyzer reloads a model into one server). The load client then sends the model's
workload (the toolkit's pool, or the user's ``--requests``) with each answer checked, and
the figures are the gate's (exact nearest-rank percentiles over the measured window) plus
the mean batch the frontend really formed, from the metrics port's counters.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tsbatch.analysis.selection import TunePoint
from tsbatch.analysis.tune.mar import MarInfo, repackage
from tsbatch.analysis.tune.search import DECODE_THREADS
from tsbatch.archive.manifest import Manifest, ModelSpec
from tsbatch.archive.package import private_store
from tsbatch.archive.traffic import Traffic
from tsbatch.client.load import LoadDriver, LoadSpec
from tsbatch.client.metrics import mean_formed_batch
from tsbatch.client.torchserve import CallFailed
from tsbatch.server.process import TorchServe, WorkerLoadError, start_instance
from tsbatch.settings.batch import BatchSettings


def nan_if_none(value: float | None) -> float:
    return math.nan if value is None else float(value)


def describe_point(point: TunePoint) -> str:
    if point.failure:
        return f"[tune] {point.model} {point.short_label:<12} FAILED {point.failure} ({point.seconds:.0f} s)"
    batch = "-" if point.mean_batch_size is None else f"{point.mean_batch_size:.2f}"
    return (
        f"[tune] {point.model} {point.short_label:<12} {point.throughput_rps:7.1f} rps  p50 {point.p50_ms:6.0f}  "
        f"p95 {point.p95_ms:6.0f}  p99 {point.p99_ms:6.0f} ms  errors {point.error_rate:6.2%}  "
        f"mean batch {batch:>5}  ({point.requests} req, {point.seconds:.0f} s)"
    )


class EveryPointFails(RuntimeError):
    """Two points in a row lost their worker to the same load error: no setting can help."""


def check_served(server: TorchServe, point: TunePoint) -> None:
    """The server must batch as the point says (a stale archive setting would win silently)."""
    served = BatchSettings.described(server.client.describe(point.model))
    wanted = point.settings
    said = (wanted.batch_size, wanted.max_batch_delay_ms, wanted.workers)
    if (served.batch_size, served.max_batch_delay_ms, served.workers) != said:
        raise RuntimeError(
            f"TorchServe serves batch {served.batch_size}, delay {served.max_batch_delay_ms} ms, "
            f"{served.workers} workers instead"
        )


class PointRunner:
    """Package, serve, load and measure one configuration of one model (:meth:`stage` says
    how a point's archive and properties are made)."""

    def __init__(
        self,
        model: str,
        properties: Path,
        workload: Traffic,
        load: LoadSpec,
        work_dir: Path,
        log_dir: Path,
        log: Callable[[str], None] = print,
    ) -> None:
        self.model, self.properties, self.workload = model, properties, workload
        self.load, self.work_dir, self.log_dir, self.log = load, work_dir, log_dir, log
        self.server: TorchServe | None = None  # the search's one TorchServe, once started
        self.points_served = 0
        self.last_load_error: str | None = None
        # The decode pool the archive is packaged with (None: its kind has none).
        self.packaged_decode_threads: int | str | None = None

    def __call__(self, settings: BatchSettings) -> TunePoint:
        model = self.model
        if settings.worker_key(DECODE_THREADS) is None and self.packaged_decode_threads is not None:
            settings = settings.with_worker(**{DECODE_THREADS: self.packaged_decode_threads})
        point = TunePoint(model, settings)
        point_dir = Path(
            tempfile.mkdtemp(prefix=f"{model}-{point.short_label.replace(' ', '-')}-", dir=self.work_dir)
        )
        started = time.perf_counter()
        server: TorchServe | None = None
        load_error: tuple[WorkerLoadError, Path] | None = None  # and the point's kept log
        try:
            server = self.serve(point, point_dir)
            check_served(server, point)
            point = replace(self.measure(point, server), seconds=round(time.perf_counter() - started, 1))
        except Exception as exc:  # a point that cannot run is reported; the search goes on
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
            point = replace(point, failure=message, seconds=round(time.perf_counter() - started, 1))
            kept = self.keep_log(point, server or self.server, exc)
            if isinstance(exc, WorkerLoadError):
                load_error = (exc, kept)
        finally:
            self.retire(point_dir)
        self.log(describe_point(point))
        self.stop_if_hopeless(load_error)
        return point

    def stop_if_hopeless(self, load_error: tuple[WorkerLoadError, Path] | None) -> None:
        """A load error that the point before also hit does not depend on the settings."""
        reason = load_error[0].failure.exception if load_error else None
        if load_error is not None and reason == self.last_load_error:
            error, kept = load_error
            raise EveryPointFails(f"{error.failure.describe()}\n(the point's log: {kept})")
        self.last_load_error = reason

    def serve(self, point: TunePoint, point_dir: Path) -> TorchServe:
        """The point's own archive served by the search's TorchServe: the first point starts
        it (and a point after it exited starts it again), later points replace the archive."""
        if self.server is not None and self.server.exited():
            self.stop_server()
        served_store = self.work_dir / f"{self.model}-served" / "model-store"
        served_store.mkdir(parents=True, exist_ok=True)
        if self.server is None:  # what the server starts with (its properties) outlives the point
            point_dir = Path(tempfile.mkdtemp(prefix="start-", dir=served_store.parent))
        properties, store = self.stage(point.settings.entry(), point_dir)
        self.points_served += 1
        archive = f"{self.model}-point{self.points_served}.mar"
        shutil.copy(store / f"{self.model}.mar", served_store / archive)
        if self.server is None:
            run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=served_store.parent))
            overrides = {"load_models": archive, "enable_model_api": "true"}  # loopback, private
            self.server = start_instance(
                run_dir, served_store, [self.model], source=properties, overrides=overrides, timeout=180
            )
            return self.server
        self.unregister_all(self.server)
        self.server.register_and_wait(archive, self.model, point.settings.workers or 1, timeout=180)
        return self.server

    def unregister_all(self, server: TorchServe) -> None:
        """Every version of the model unregistered (its workers stopped) and its archives
        deleted, but the newest: the next point starts on an idle server."""
        try:
            versions = server.client.versions(self.model)
        except CallFailed as exc:
            if exc.status != 404:
                raise
            versions = []
        for version in versions:
            server.client.unregister(self.model, version)
        newest = f"{self.model}-point{self.points_served}.mar"
        for old in server.model_store.glob(f"{self.model}-point*.mar"):
            if old.name != newest:
                old.unlink()

    def stop_server(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            server.stop()

    def stage(self, settings: dict[str, int | str], point_dir: Path) -> tuple[Path, Path]:
        """The properties and the model store that serve the model with ``settings``."""
        raise NotImplementedError

    def measure(self, point: TunePoint, server: TorchServe) -> TunePoint:
        model = point.model
        driver = LoadDriver(
            f"{server.url('inference')}/predictions/{model}",
            [item.body for item in self.workload.payloads],
            content_types=[item.content_type for item in self.workload.payloads],
            headers=server.client.headers("inference"),
            model=model,
            check=self.workload.problem,
        )
        result = driver.run(self.load, server.client.metrics_text)
        figures = result.figures()
        if result.problems:
            self.log(f"[tune]   failures: {result.problems}")
        return replace(
            point,
            throughput_rps=figures.throughput_rps or 0.0,
            p50_ms=nan_if_none(figures.p50_ms),
            p95_ms=nan_if_none(figures.p95_ms),
            p99_ms=nan_if_none(figures.p99_ms),
            error_rate=figures.error_rate or 0.0,
            mean_batch_size=mean_formed_batch(result.metrics_before, result.metrics_after, model)
            if result.metrics_before and result.metrics_after
            else None,
            requests=figures.requests,
        )

    def retire(self, point_dir: Path) -> None:
        shutil.rmtree(point_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop the search's TorchServe (the JVM takes seconds to exit)."""
        self.stop_server()

    def keep_log(self, point: TunePoint, server: TorchServe | None, exc: BaseException) -> Path:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{point.model}_{point.short_label.replace(' ', '_')}.log"
        tail = server.log_tail(80) if server is not None else ""
        path.write_text(f"{type(exc).__name__}: {exc}\n\n{tail}\n")
        return path


class ManifestPointRunner(PointRunner):
    """Points of a manifest model: packaged from its exported artifacts at each setting."""

    def __init__(self, spec: ModelSpec, manifest: Manifest, *args: Any, **kwargs: Any) -> None:
        super().__init__(spec.name, *args, **kwargs)
        self.spec, self.manifest = spec, manifest

    def stage(self, settings: dict[str, int | str], point_dir: Path) -> tuple[Path, Path]:
        this_spec = replace(self.manifest, models={**self.manifest.models, self.model: self.spec})
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            return private_store(
                point_dir, [self.model], {self.model: settings}, source=self.properties, manifest=this_spec
            )


class MarPointRunner(PointRunner):
    """Points of any archive (``--mar``): its model-config.yaml rewritten at each setting,
    served with the toolkit's config.properties otherwise."""

    def __init__(self, info: MarInfo, *args: Any, **kwargs: Any) -> None:
        super().__init__(info.model, *args, **kwargs)
        self.info = info

    def stage(self, settings: dict[str, int | str], point_dir: Path) -> tuple[Path, Path]:
        store = point_dir / "model-store"
        repackage(self.info, store / f"{self.model}.mar", with_decode_threads(self.info, settings))
        return self.properties, store


def with_decode_threads(info: MarInfo, settings: dict[str, Any]) -> dict[str, Any]:
    """An archive's settings with ``decodeThreads`` moved into its handler config, where the
    toolkit's image worker reads it (a models= entry spells it at the top level)."""
    settings = dict(settings)
    threads = settings.pop(DECODE_THREADS, None)
    if threads is not None:
        settings["handler"] = {**info.config.get("handler", {}), "decode_threads": threads}
    return settings
