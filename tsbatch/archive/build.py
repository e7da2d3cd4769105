"""The build every kind shares, written once: its eager model, its TorchScript saved and
verified from the file, the candidates compiled, quantized, gated and timed
(``tsbatch.archive.compiled``), the report's gates section, and the files the archive
packages (model, labels, handler config, build info).

A kind plugs in ``BuildHooks``: how it loads or trains its model, makes and verifies its
TorchScript, what its gates run on (examples, scorer, int8 plan) and what it adds to the
handler config and the build info. The core calls them in one order for every kind.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from tsbatch.archive import artifacts
from tsbatch.archive.compiled import CompileSettings, GateData, build_and_gate, compile_settings
from tsbatch.archive.gate_report import write_gates_section
from tsbatch.archive.int8.candidate import Int8Plan
from tsbatch.archive.kind import KindModel
from tsbatch.archive.schema import Common

# What a build writes and a failed one must not leave behind from an earlier build.
BUILT_FILES = (
    artifacts.MODEL_FILE,
    artifacts.HANDLER_CONFIG_FILE,
    artifacts.LABELS_FILE,
    artifacts.BUILD_INFO_FILE,
    artifacts.REPORT_MARKDOWN,
)


@dataclass(frozen=True)
class Verified:
    """A kind's verification figures, and why it serves no TorchScript ("": it does)."""

    figures: dict[str, float]
    no_torchscript: str = ""


@dataclass(frozen=True)
class GatePlan:
    """What a kind's candidates are gated on: the eager module the packages are compiled
    from (None: none can be), its gate data (examples, scorer, check inputs, shapes) and
    what its int8 candidate needs (None: dynamic, the default limits)."""

    eager: torch.nn.Module | None
    data: GateData
    int8: Int8Plan | None = None


class BuildHooks(Protocol):
    """What a kind plugs into :func:`build`, in the order it is called."""

    def load(self, out: Path) -> Common:
        """Load or train the eager model (writing what it reports into ``out``); returns the
        entry the archive is built from (the manifest's, or with the command's overrides)."""
        ...

    def torchscript(self) -> torch.jit.ScriptModule:
        """The TorchScript module: the user's own, or made from the eager model."""
        ...

    def verify(self, torchscript: torch.jit.ScriptModule) -> Verified:
        """Check the TorchScript read back from its file; raise when it fails."""
        ...

    def gate_plan(self, settings: CompileSettings, torchscript: torch.jit.ScriptModule | None) -> GatePlan:
        """The gates' inputs at these compile settings."""
        ...

    def labels(self) -> list[str]: ...

    def handler_fields(self, out: Path, served: torch.nn.Module | None) -> dict[str, Any]:
        """What the build found, for the handler config (``Kind.resolved``); ``served``: the
        verified TorchScript (None: it has none)."""
        ...

    def build_info(self) -> dict[str, Any]:
        """Its fields of build_info.json, before the verification."""
        ...

    def libraries(self) -> dict[str, str]:
        """The versions of the libraries its model comes from, after torch's."""
        ...

    def description(self) -> str:
        """The model, as the build's last line names it."""
        ...


def clear_built(out: Path, before: float) -> None:
    """Remove what an earlier build wrote (files last written before ``before``, a Unix
    time), so a failed build cannot leave a stale mix or show an earlier build's report;
    what this build's ``load`` wrote (a training report) stays."""
    for name in BUILT_FILES:
        path = out / name
        if path.is_file() and path.stat().st_mtime < before:
            path.unlink()


def load_torchscript(path: Path) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # TorchScript is what TorchServe loads
        return torch.jit.load(str(path))


def build(spec: KindModel, hooks: BuildHooks, out: Path | None = None) -> Path:
    """Build ``out`` (default ``build/<model>/``) for ``spec`` through its kind's ``hooks``;
    raises when a check, a gate the kind enforces or the packages of a model without
    TorchScript fail."""
    started = time.perf_counter()
    out = out or spec.artifact_dir
    out.mkdir(parents=True, exist_ok=True)
    began = time.time()
    entry = hooks.load(out)
    # Only now: a build that cannot even load (weights not found) leaves the last good one.
    clear_built(out, before=began)
    model_path = out / artifacts.MODEL_FILE
    hooks.torchscript().save(str(model_path))
    try:
        served: torch.jit.ScriptModule | None = load_torchscript(model_path)  # the file served
        assert served is not None
        verified = hooks.verify(served)
    except Exception:
        model_path.unlink(missing_ok=True)
        raise
    if verified.no_torchscript:
        model_path.unlink()
        served = None
    settings = compile_settings(entry.compile)
    plan = hooks.gate_plan(settings, served)
    gates = build_and_gate(
        plan.eager, served, out, settings, plan.data, plan.int8, no_torchscript=verified.no_torchscript
    )
    write_gates_section(out, gates, spec.name)
    artifacts.write_json(out / artifacts.LABELS_FILE, hooks.labels())
    found = {**hooks.handler_fields(out, served), **gates.handler_fields()}
    artifacts.write_json(
        out / artifacts.HANDLER_CONFIG_FILE, spec.kind.handler_config(spec.name, entry, found)
    )
    info = {
        "model": spec.name,
        **hooks.build_info(),
        "verification": verified.figures,
        **gates.build_info(),
        "torch": torch.__version__,
        **hooks.libraries(),
    }
    artifacts.write_json(out / artifacts.BUILD_INFO_FILE, info)
    target = model_path if served is not None else ", ".join(gates.compiled_models)
    seconds = time.perf_counter() - started
    print(f"[export] {spec.name}: {hooks.description()} -> {target} ({seconds:.0f}s)")
    return out
