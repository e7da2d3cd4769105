"""A job queue sized to the SLA: the frontend answers a request that finds its model's
queue full with an immediate 503 ("has no worker"), and queues the rest. A request queued
at the back of a full queue waits the queue's drain time (its size over the throughput):
past the p99 target, that wait only makes answers late, which a smaller queue would have
turned into fast failures the client can retry elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tsbatch.analysis.tune.report import queue_size_for, read_points_csv
from tsbatch.config.findings import Problem
from tsbatch.settings.batch import QUEUE_KEY, BatchSettings, SettingsError
from tsbatch.sla.profiles import Sla, SlaError, load_profile


def measured_throughput(tune_dir: Path, model: str, settings: BatchSettings) -> float | None:
    """The req/s the tuner measured at these batch settings (``<tune_dir>/<model>.csv``; the
    tuner's workers are min = max), None when it measured no such point."""
    path = tune_dir / f"{model}.csv"
    if not path.is_file():
        return None
    key = (settings.batch_size, settings.max_batch_delay_ms, settings.max_workers)
    measured = [
        p for p in read_points_csv(path) if p.settings.key == key and not p.failure and p.throughput_rps > 0
    ]
    return measured[-1].throughput_rps if measured else None


def queue_problems(
    properties: Mapping[str, str],
    settings: Mapping[str, Mapping[str, Any]],
    slas: Mapping[str, Sla],
    tune_dir: Path,
) -> list[Problem]:
    """A warning per model whose queue takes longer to drain than its p99 target allows,
    with the size that fits; silent where the SLA or the measured throughput is unknown."""
    problems = []
    for model, entry in settings.items():
        try:
            served = BatchSettings.configured(properties, model, entry)
        except SettingsError:  # the check of the models= entry says what is wrong
            continue
        throughput = measured_throughput(tune_dir, model, served)
        if model not in slas or throughput is None:
            continue
        sla, size = slas[model], served.queue_size(properties)
        drain_ms = 1000 * size / throughput
        if drain_ms <= sla.p99_ms:
            continue
        fits = queue_size_for(throughput, sla.p99_ms, served.batch_size)
        where = f"models.{model}.{QUEUE_KEY}" if QUEUE_KEY in entry else "job_queue_size"
        problems.append(
            Problem(
                "warning",
                where,
                f"{model}'s queue holds {size} requests: {drain_ms:.0f} ms to drain at the {throughput:.1f} req/s "
                f"the tuner measured ({tune_dir / model}.csv), over the {sla.profile} p99 target of "
                f"{sla.p99_ms:g} ms, so a request queued at the back is answered late anyway. Set "
                f'"{QUEUE_KEY}": {fits} in its models= entry (throughput x p99 target): past it the frontend '
                "answers 503 at once and the client can retry elsewhere.",
            )
        )
    return problems


def sized_queues(
    values: Mapping[str, str], settings: Mapping[str, Mapping[str, Any]], tune_dir: Path, sla_file: Path
) -> list[Problem]:
    """Each model's job queue against its SLA's p99 target and the tuner's measured
    throughput (above); nothing to judge without an SLA file."""
    if not sla_file.is_file():
        return []
    try:
        slas = load_profile(path=sla_file)
    except SlaError as exc:
        return [Problem("warning", "SLA", f"{exc}; the job queues were not judged against it.")]
    return queue_problems(values, settings, slas, tune_dir)
