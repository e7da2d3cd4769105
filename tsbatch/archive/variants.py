"""Benchmark rows: the archive's serving candidates this machine can run, and archive
copies that pin one (the rows of the benchmarks, the candidates of the tuner).

Every rule comes from ``batchkit.planner``, the one the workers follow: a row is a
candidate the build gated whose package runs here (CPU flags, export bound), at a
precision this CPU computes natively (emulated bf16 says nothing about the target
hardware), and the default row is the planner's first choice, what a worker here serves.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import torch

from batchkit.candidates import ServingCandidate
from batchkit.config import ModelConfig, from_mapping
from batchkit.loader import host_here
from batchkit.planner import Host, Reason, plan, runnable_rows
from tsbatch.archive import artifacts
from tsbatch.archive.manifest import ModelSpec


def archive_config(artifact_dir: Path) -> ModelConfig:
    """The serving part of a built model's handler config (the model kind's own keys aside)."""
    values = artifacts.read_json(artifact_dir / artifacts.HANDLER_CONFIG_FILE)
    names = {field.name for field in dataclasses.fields(ModelConfig)}
    defaults = {
        "model_name": artifact_dir.name,
        "model_file": artifacts.MODEL_FILE,
        "labels_file": artifacts.LABELS_FILE,
    }
    return from_mapping(ModelConfig, {**defaults, **{k: v for k, v in values.items() if k in names}})


def machine_variants(
    artifact_dir: Path, batch_size: int = 1, host: Host | None = None
) -> tuple[list[ServingCandidate], list[Reason]]:
    """The rows this machine can run (fp32 TorchScript first), and why the others are not."""
    host = host or host_here(artifact_dir, torch.device("cpu"), batch_size)
    return runnable_rows(archive_config(artifact_dir), host)


def default_variant(artifact_dir: Path, batch_size: int = 1, host: Host | None = None) -> ServingCandidate:
    """What a CPU worker of this archive serves here first: the planner's first choice."""
    host = host or host_here(artifact_dir, torch.device("cpu"), batch_size)
    return plan(archive_config(artifact_dir), host).first


def variant_spec(spec: ModelSpec, work: Path, variant: ServingCandidate) -> ModelSpec:
    """A copy of the model's build directory whose handler config pins ``variant``."""
    build_dir = work / f"build-{variant.name}"
    copy = build_dir / spec.name
    if not copy.exists():
        shutil.copytree(spec.artifact_dir, copy)
    path = copy / artifacts.HANDLER_CONFIG_FILE
    config = artifacts.read_json(path)
    config.update(runtime=variant.runtime, precision=variant.precision)
    artifacts.write_json(path, config)
    return dataclasses.replace(spec, build_dir=build_dir)
