"""The one planner: which candidates a worker tries, in order, and why.

Workers (``batchkit.loader``), ``make doctor`` (``tsbatch.machine``), the benchmarks, the
tuner and the sweep all ask it, so none can tell another story. It is pure: the inputs are
the archive's typed config and a :class:`Host` (files present, device type, CPU flags and
model name, batch size, the worker's environment override); the output is a :class:`Plan`,
candidates best first (fp32 TorchScript last where the archive has it, the one that must work) with
structured reasons.

The rule, in order:

* an explicit precision (the environment's, else the archive's) wins: that precision's
  candidates first, then fp32 TorchScript;
* ``auto`` on a CPU of the model the build timed on serves by measurement: every usable
  candidate the build timed that beats fp32 TorchScript by ``MARGIN``, fastest first. Native
  bf16 can be slower than fp32 (AVX-512 BF16 without AMX), which no flag says;
* ``auto`` elsewhere (another CPU model, a GPU, an archive without timings) falls back to
  the flag rule (``batchkit.precision.flag_precision``), with a reason saying why;
* int8 has no TorchScript form: when its package is unusable, the next fastest timed
  candidate follows (by flags: TorchScript at bf16 where native, else fp32);
* an archive without TorchScript (``model_file`` empty: a ``torch.export`` program that does
  not trace into a batch-general module) has only its packages: the same order without
  fp32 TorchScript to beat or to end with, every other usable package after the chosen
  precision's, batches beyond the export bound in slices; no usable package, an empty plan
  (the worker fails to load, saying why).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from batchkit.candidates import BASELINE, PRECISIONS, ServingCandidate
from batchkit.config import BuildTimings, ModelConfig
from batchkit.precision import flag_precision, native_cpu_bf16, native_cpu_int8

# A candidate must beat the one it replaces by this share of its time per batch: a smaller
# lead is within the build's run-to-run noise, and fp32 TorchScript is the artifact users
# asked for.
MARGIN = 0.1


@dataclass(frozen=True)
class Reason:
    """One reason of a decision: a stable ``code`` for programs, a ``detail`` for people,
    and the candidate it is about (empty: the decision as a whole)."""

    code: str
    detail: str
    candidate: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True)
class Host:
    """What the planner knows of the machine and the worker."""

    device_type: str = "cpu"
    flags: frozenset[str] = frozenset()
    cpu_model: str = "unknown"
    batch_size: int = 1
    files: frozenset[str] = frozenset()
    cuda_bf16: bool = False
    # The worker's environment override (TSBATCH_PRECISION); the build never sets it.
    precision_setting: str = ""


@dataclass(frozen=True)
class Plan:
    """The candidates to try, best first, and why (fp32 TorchScript last where the archive has it)."""

    candidates: tuple[ServingCandidate, ...]
    reasons: tuple[Reason, ...]

    @property
    def first(self) -> ServingCandidate:
        if not self.candidates:
            raise NothingToServeError(nothing_to_serve(self))
        return self.candidates[0]


class NothingToServeError(RuntimeError):
    """An archive without TorchScript none of whose packages this host can serve."""


def nothing_to_serve(planned: Plan) -> str:
    """What a host that can serve nothing of an archive is told (the plan's reasons)."""
    return (
        "this archive has no TorchScript model and none of its AOTInductor packages can serve here ("
        + "; ".join(map(str, planned.reasons))
        + "): rebuild it on a machine like this one (`tsbatch archive`)"
    )


def has_torchscript(config: ModelConfig) -> bool:
    """Whether the archive carries the fp32 TorchScript model (the fallback of every plan)."""
    return bool(config.model_file)


def no_torchscript_reason(config: ModelConfig, host: Host) -> Reason:
    detail = (
        "the archive has no TorchScript model (its exported program does not trace into one "
        "that serves every batch size): only its packages serve"
    )
    bound = config.compiled_max_batch_size
    if bound and host.batch_size > bound:
        detail += f"; batches of {host.batch_size} run in slices of {bound}, the size they were exported for"
    return Reason("no-torchscript", detail)


def baseline_of(config: ModelConfig, device_type: str) -> tuple[ServingCandidate, ...]:
    """What every plan ends with: fp32 TorchScript, or nothing when the archive has none."""
    return (BASELINE.on(device_type),) if has_torchscript(config) else ()


def missing_cpu_flags(config: ModelConfig, flags: Iterable[str]) -> list[str]:
    """The build CPU's compiled-code features this CPU lacks (empty: its packages may run)."""
    present = set(flags)
    return [flag for flag in config.compiled_cpu_flags if flag not in present]


def known_candidates(config: ModelConfig, device_type: str) -> list[ServingCandidate]:
    """Every candidate the archive names for ``device_type``, fp32 TorchScript last (where
    the archive has it)."""
    names = (*config.compiled_models, *config.check_outputs, *config.failed_gates, *config.timings_ms.ms)
    found: dict[str, ServingCandidate] = {}
    for text in names:
        candidate = ServingCandidate.parse(text, device_type)
        if candidate.device == device_type and candidate.name != BASELINE.name:
            found[candidate.name] = candidate
    return [*found.values(), *baseline_of(config, device_type)]


def unusable(config: ModelConfig, host: Host, candidate: ServingCandidate) -> Reason | None:
    """Why this worker cannot serve ``candidate`` whatever its precision, or None."""
    name, file = candidate.name, candidate.file_name
    if candidate.name == BASELINE.name:
        return None
    if name in config.failed_gates:
        return Reason("failed-gates", f"{name} failed the build gates", name)
    if candidate.runtime == "torchscript":
        if name not in config.check_outputs:
            return Reason("not-gated", f"{name} was not gated by the build", name)
        return None
    if config.runtime == "torchscript":
        return Reason("runtime-set", f"{name}: runtime set to torchscript", name)
    if file not in config.compiled_models:
        return Reason("not-gated", f"the archive has no {file} that passed the build gates", name)
    if file not in host.files:
        return Reason("missing-file", f"{file} is listed but missing from the archive", name)
    if host.batch_size > config.compiled_max_batch_size and has_torchscript(config):
        return Reason(
            "export-bound",
            f"batch size {host.batch_size} exceeds the {config.compiled_max_batch_size} {file} was exported for",
            name,
        )
    missing = missing_cpu_flags(config, host.flags) if candidate.device == "cpu" else []
    if missing:
        return Reason(
            "cpu-flags", f"{file} was compiled on a CPU with {', '.join(missing)}, which this CPU lacks", name
        )
    return None


def usable_candidates(config: ModelConfig, host: Host) -> tuple[list[ServingCandidate], list[Reason]]:
    """The candidates this host can serve (fp32 TorchScript always), and why not the others."""
    usable, reasons = [], []
    for candidate in known_candidates(config, host.device_type):
        problem = unusable(config, host, candidate)
        if problem is None:
            usable.append(candidate)
        else:
            reasons.append(problem)
    return usable, reasons


def native_precision(precision: str, host: Host) -> bool:
    """Whether this host computes ``precision`` in hardware (a CPU: by its flags)."""
    if host.device_type == "cuda":
        return precision != "int8" and (precision != "bf16" or host.cuda_bf16)
    natively = {"fp32": True, "bf16": native_cpu_bf16(host.flags), "int8": native_cpu_int8(host.flags)}
    return natively.get(precision, False)


def runnable_rows(config: ModelConfig, host: Host) -> tuple[list[ServingCandidate], list[Reason]]:
    """The candidates worth measuring on this host (the benchmarks' rows): usable, at a
    precision it computes natively (an emulated figure says nothing about the target
    hardware); fp32 TorchScript first where the archive has it."""
    usable, reasons = usable_candidates(config, host)
    rows = list(baseline_of(config, host.device_type))
    for candidate in usable:
        if candidate in rows:
            continue
        if native_precision(candidate.precision, host):
            rows.append(candidate)
        else:
            detail = f"{candidate.name}: no native {candidate.precision} on this machine"
            reasons.append(Reason("emulated", detail, candidate.name))
    return rows, reasons


def same_cpu_timings(config: ModelConfig, host: Host) -> tuple[BuildTimings | None, Reason]:
    """The build's timings when they describe this machine (else None), and why."""
    timings = config.timings_ms
    if host.device_type != "cpu":
        return None, Reason(
            "timings-cpu-only", f"the build timed its CPU, not this {host.device_type}: flag rule"
        )
    if BASELINE.name not in timings.ms and (has_torchscript(config) or not timings.ms):
        return None, Reason("no-timings", "the archive has no build timings: flag rule")
    if timings.cpu_model != host.cpu_model:
        return None, Reason(
            "other-cpu",
            f"the build timed on another CPU model ({timings.cpu_model}; this is {host.cpu_model}): flag rule",
        )
    rule = "the fastest that beats fp32 serves" if has_torchscript(config) else "the fastest serves"
    return timings, Reason("measured", f"{timings_detail(timings)}; {rule}")


def timings_detail(timings: BuildTimings) -> str:
    shown = ", ".join(
        f"{name} {ms:g} ms" for name, ms in sorted(timings.ms.items(), key=lambda item: item[1])
    )
    return f"timed on {timings.cpu_model} per batch of {timings.batch_size}: {shown}"


def beats(ms: float | None, rival_ms: float) -> bool:
    """Whether ``ms`` is faster than ``rival_ms`` by ``MARGIN``."""
    return ms is not None and ms <= rival_ms * (1 - MARGIN)


def measured_order(
    config: ModelConfig, usable: list[ServingCandidate], timings: BuildTimings, reasons: list[Reason]
) -> list[ServingCandidate]:
    """The timed candidates that beat fp32 TorchScript, fastest first (a pinned runtime's
    own candidates first, its fp32 one exempt from the margin). Without TorchScript there
    is nothing to beat: every usable candidate, timed fastest first, then the untimed."""
    if not has_torchscript(config):
        return sorted(usable, key=lambda c: timings.ms.get(c.name, math.inf))
    fp32_ms = timings.ms[BASELINE.name]
    order = []
    for candidate in sorted(usable, key=lambda c: timings.ms.get(c.name, math.inf)):
        ms = timings.ms.get(candidate.name)
        pinned = candidate.runtime == config.runtime and candidate.precision == "fp32"
        if candidate.name == BASELINE.name:
            continue
        if ms is None:
            reasons.append(
                Reason("not-timed", f"{candidate.name} was not timed by the build", candidate.name)
            )
        elif beats(ms, fp32_ms) or pinned:
            order.append(candidate)
        else:
            reasons.append(
                Reason(
                    "slower-than-fp32",
                    f"{candidate.name} {ms:g} ms is not {MARGIN:.0%} faster than {BASELINE.name} {fp32_ms:g} ms",
                    candidate.name,
                )
            )
    if config.runtime != "auto":
        order.sort(key=lambda c: c.runtime != config.runtime)
    return order


def package_loses(config: ModelConfig, candidate: ServingCandidate) -> Reason | None:
    """Under runtime ``auto``, why a package is passed over for TorchScript at its own
    precision: the build timed both and the package was not ``MARGIN`` faster (untimed: the
    package is kept)."""
    if config.runtime != "auto" or candidate.runtime != "aoti" or candidate.precision == "int8":
        return None
    twin = ServingCandidate("torchscript", candidate.device, candidate.precision).name
    ms, twin_ms = config.timings_ms.ms.get(candidate.name), config.timings_ms.ms.get(twin)
    if ms is None or twin_ms is None or beats(ms, twin_ms):
        return None
    detail = f"{candidate.name} {ms:g} ms is not {MARGIN:.0%} faster than {twin} {twin_ms:g} ms"
    return Reason("runtime-timed", f"runtime auto: {detail}", candidate.name)


def precision_order(
    config: ModelConfig,
    usable: list[ServingCandidate],
    precision: str,
    timings: BuildTimings | None,
    reasons: list[Reason],
    device_type: str = "cpu",
) -> list[ServingCandidate]:
    """The usable candidates at ``precision`` (fp32 TorchScript aside), best first: by the
    build's timings on this CPU where given, else packages first."""
    order = []
    for candidate in usable:
        if candidate.precision != precision or candidate.name == BASELINE.name:
            continue
        loses = package_loses(config, candidate)
        if loses is None:
            order.append(candidate)
        else:
            reasons.append(loses)
    package = ServingCandidate("aoti", device_type, precision)
    told = any(reason.candidate == package.name for reason in reasons)
    if config.runtime == "aoti" and package not in order and not told:
        reasons.append(
            Reason("no-package", f"runtime aoti, but the archive has no {package.file_name}", package.name)
        )
    if timings is not None:
        order.sort(key=lambda c: timings.ms.get(c.name, math.inf))
    order.sort(key=lambda c: c.runtime != ("aoti" if config.runtime == "auto" else config.runtime))
    return order


def int8_ready(config: ModelConfig, usable: list[ServingCandidate]) -> bool:
    """Whether the flag rule may take int8: its package is usable here and the build timed
    it ``MARGIN`` faster than every other candidate it timed (untimed: never)."""
    int8 = [c.name for c in usable if c.precision == "int8"]
    if not int8:
        return False
    timed = config.timings_ms.ms
    others = [ms for name, ms in timed.items() if name != int8[0]]
    return int8[0] in timed and bool(others) and beats(timed[int8[0]], min(others))


def explicit_precision(requested: str, host: Host, source: str) -> tuple[str, Reason]:
    """The precision an explicit setting gets on this host (a GPU lacks int8, maybe bf16)."""
    if host.device_type == "cuda" and requested == "int8":
        precision, detail = flag_precision("cuda", host.flags, host.cuda_bf16)
        return precision, Reason(
            "precision-set", f"int8 {source}, but int8 is CPU-only: {precision} ({detail})"
        )
    if host.device_type == "cuda" and requested == "bf16" and not host.cuda_bf16:
        return "fp16", Reason("precision-set", f"bf16 {source}, unsupported on this GPU: fp16")
    if not native_precision(requested, host):
        return requested, Reason(
            "precision-set", f"{requested} {source}; this CPU lacks it natively (emulated or slow)"
        )
    return requested, Reason("precision-set", f"{requested} {source}")


def plan(config: ModelConfig, host: Host) -> Plan:
    """What a worker of this archive serves on ``host``, best first, and why."""
    requested = host.precision_setting or config.precision
    if requested not in (*PRECISIONS, "auto"):
        raise ValueError(f"precision must be auto or one of {PRECISIONS}, got {requested!r}")
    usable, reasons = usable_candidates(config, host)
    last = baseline_of(config, host.device_type)
    notes = [] if last else [no_torchscript_reason(config, host)]
    measured, why = same_cpu_timings(config, host)
    if requested == "auto" and measured is not None:
        order = measured_order(config, usable, measured, reasons)
        return Plan((*order, *last), (why, *notes, *reasons))
    if requested == "auto":
        precision, detail = flag_precision(
            host.device_type, host.flags, host.cuda_bf16, int8_ready(config, usable)
        )
        heads = [why, Reason("flag-rule", f"precision {precision}: {detail}")]
    else:
        source = "set by TSBATCH_PRECISION" if host.precision_setting else "set in the archive"
        precision, head = explicit_precision(requested, host, source)
        heads = [head]
    order = precision_order(config, usable, precision, measured, reasons, host.device_type)
    if precision == "int8":
        if measured is not None:
            following = measured_order(config, [c for c in usable if c.precision != "int8"], measured, [])
            reasons.append(
                Reason(
                    "int8-fallback",
                    "int8 has no TorchScript form: the next fastest timed on this CPU follows",
                )
            )
        else:
            fallback = "bf16" if native_cpu_bf16(host.flags) else "fp32"
            following = precision_order(config, usable, fallback, None, reasons, host.device_type)
            reasons.append(
                Reason("int8-fallback", f"int8 has no TorchScript form: {fallback} next (CPU flags)")
            )
        order += following
    if not last:  # no TorchScript to fall back on: every other usable package follows
        timed = measured.ms if measured is not None else {}
        rest = [c for c in usable if c not in order]
        order += sorted(rest, key=lambda c: timed.get(c.name, math.inf))
    return Plan((*order, *last), (*heads, *notes, *reasons))
