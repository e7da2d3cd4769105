"""The planner on pure inputs: the build's timings, CPU flags and model, files, batch size.

Every branch is forced through its inputs, so the suite covers them on any CPU."""

from __future__ import annotations

from typing import Any

import pytest

from batchkit.candidates import ServingCandidate
from batchkit.config import ModelConfig, from_mapping
from batchkit.planner import Host, NothingToServeError, Plan, nothing_to_serve, plan, runnable_rows

XEON = "Intel(R) Xeon(R) CPU with AVX-512 BF16, no AMX"
OTHER = "AMD EPYC 9654 96-Core Processor"
AVX512_BF16 = frozenset({"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"})
AVX2 = frozenset({"avx2", "fma"})
FILES = frozenset({"model.pt", "model.cpu-bf16.pt2", "model.cpu-int8.pt2", "model.cpu-fp32.pt2"})
# The build timings on the Xeon: bf16 no faster than fp32 TorchScript.
SLOW_BF16 = {"torchscript-fp32": 10.58, "aoti-cpu-bf16": 10.45, "torchscript-bf16": 15.45}


def config(
    packages: tuple[str, ...] = ("bf16",), ms: dict[str, float] | None = None, **fields: Any
) -> ModelConfig:
    names = [ServingCandidate("aoti", "cpu", p) for p in packages]
    names += [ServingCandidate("torchscript", "cpu", p) for p in ("fp32", "bf16")]
    values = {
        "model_name": "m",
        "model_file": "model.pt",
        "labels_file": "labels.json",
        "compiled_models": [c.file_name for c in names if c.runtime == "aoti"],
        "compiled_max_batch_size": 8,
        "check_outputs": {c.name: [[1.0]] for c in names},
        "compiled_cpu_flags": ["avx2", "fma"],
        "timings_ms": {"cpu_model": XEON, "batch_size": 8, "ms": SLOW_BF16 if ms is None else ms},
        **fields,
    }
    return from_mapping(ModelConfig, values)


def host(**fields: Any) -> Host:
    values = {"flags": AVX512_BF16, "cpu_model": XEON, "batch_size": 8, "files": FILES, **fields}
    return Host(**values)


def names(planned: Plan) -> list[str]:
    return [candidate.name for candidate in planned.candidates]


def codes(planned: Plan) -> dict[str, str]:
    """Each reason's code by the candidate it is about ('' for the decision itself)."""
    return {reason.candidate: reason.code for reason in planned.reasons}


def test_bf16_timed_slower_than_fp32_serves_fp32_torchscript_despite_the_flag() -> None:
    planned = plan(config(), host())
    assert names(planned) == ["torchscript-fp32"]
    head = planned.reasons[0]
    assert head.code == "measured" and XEON in head.detail
    assert "torchscript-fp32 10.58 ms" in head.detail and "torchscript-bf16 15.45 ms" in head.detail
    assert codes(planned)["aoti-cpu-bf16"] == codes(planned)["torchscript-bf16"] == "slower-than-fp32"


def test_bf16_timed_faster_is_served() -> None:
    planned = plan(config(ms={**SLOW_BF16, "aoti-cpu-bf16": 6.0}), host())
    assert names(planned) == ["aoti-cpu-bf16", "torchscript-fp32"]
    assert planned.first == ServingCandidate("aoti", "cpu", "bf16")
    assert codes(planned)["torchscript-bf16"] == "slower-than-fp32"


def test_timings_from_another_cpu_model_fall_back_to_the_flag_rule() -> None:
    planned = plan(config(), host(cpu_model=OTHER))
    assert names(planned) == ["aoti-cpu-bf16", "torchscript-bf16", "torchscript-fp32"]
    head = planned.reasons[0]
    assert head.code == "other-cpu" and XEON in head.detail and OTHER in head.detail
    assert planned.reasons[1].code == "flag-rule" and "native bf16" in planned.reasons[1].detail
    no_timings = plan(config(ms={}), host(flags=AVX2))
    assert no_timings.reasons[0].code == "no-timings" and names(no_timings) == ["torchscript-fp32"]


def test_timings_are_not_used_on_a_gpu() -> None:
    planned = plan(config(), host(device_type="cuda", cuda_bf16=False))
    assert planned.reasons[0].code == "timings-cpu-only"
    assert planned.reasons[1].detail.startswith("precision fp16")
    assert names(planned) == ["torchscript-fp32"]  # no fp16 candidate in this archive


def test_a_gpu_serves_its_package_first_though_only_the_cpu_was_timed() -> None:
    gpu = ServingCandidate("aoti", "cuda", "bf16")
    archive = config(compiled_models=[gpu.file_name], check_outputs={gpu.name: [[1.0]]})
    planned = plan(archive, host(device_type="cuda", cuda_bf16=True, files=FILES | {gpu.file_name}))
    assert names(planned) == ["aoti-cuda-bf16", "torchscript-fp32"]
    assert planned.first == gpu and planned.candidates[-1].device == "cuda"


INT8_FAST = {"aoti-cpu-int8": 3.0, "aoti-cpu-bf16": 5.0, "torchscript-bf16": 6.0, "torchscript-fp32": 10.0}


def test_int8_unusable_serves_the_next_fastest_timed_candidate() -> None:
    archive = config(packages=("bf16", "int8"), ms=INT8_FAST)
    assert names(plan(archive, host())) == [
        "aoti-cpu-int8",
        "aoti-cpu-bf16",  # what the worker loads next when the int8 package does not
        "torchscript-bf16",
        "torchscript-fp32",
    ]
    missing = plan(archive, host(files=FILES - {"model.cpu-int8.pt2"}))
    assert names(missing)[0] == "aoti-cpu-bf16" and codes(missing)["aoti-cpu-int8"] == "missing-file"
    pinned = plan(archive, host(files=FILES - {"model.cpu-int8.pt2"}, precision_setting="int8"))
    assert names(pinned) == ["aoti-cpu-bf16", "torchscript-bf16", "torchscript-fp32"]
    assert codes(pinned)[""] == "int8-fallback"


@pytest.mark.parametrize(
    ("flags", "following"), [(AVX2, "torchscript-fp32"), (AVX512_BF16, "torchscript-bf16")]
)
def test_without_same_cpu_timings_the_int8_fallback_follows_the_flags(
    flags: frozenset[str], following: str
) -> None:
    archive = config(packages=("int8",), ms={}, precision="int8", runtime="torchscript")
    planned = plan(archive, host(flags=flags))
    assert names(planned)[0] == following
    assert "int8 has no TorchScript form" in next(
        r.detail for r in planned.reasons if r.code == "int8-fallback"
    )


@pytest.mark.parametrize("flags", [AVX512_BF16, AVX2 | {"avx512_bf16"}])
def test_an_archive_without_timings_never_takes_int8_by_the_flag_rule(flags: frozenset[str]) -> None:
    archive = config(packages=("int8",), ms={})
    assert plan(archive, host(flags=flags)).first.name == "torchscript-bf16"


def test_an_explicit_precision_wins_over_the_timings() -> None:
    fast_bf16 = config(ms={**SLOW_BF16, "aoti-cpu-bf16": 6.0})
    pinned = plan(config(precision="bf16"), host())
    assert names(pinned) == ["aoti-cpu-bf16", "torchscript-bf16", "torchscript-fp32"]
    assert pinned.reasons[0].code == "precision-set" and "in the archive" in pinned.reasons[0].detail
    from_environment = plan(fast_bf16, host(precision_setting="fp32"))
    assert names(from_environment) == ["torchscript-fp32"]
    assert "TSBATCH_PRECISION" in from_environment.reasons[0].detail
    with pytest.raises(ValueError, match="precision must be auto or one of"):
        plan(fast_bf16, host(precision_setting="int3"))


def test_at_fp32_a_package_must_beat_torchscript_by_the_margin_under_runtime_auto() -> None:
    near = {"torchscript-fp32": 10.0, "aoti-cpu-fp32": 9.5}
    archive = config(packages=("fp32",), ms=near, precision="fp32")
    planned = plan(archive, host())
    assert names(planned) == ["torchscript-fp32"] and codes(planned)["aoti-cpu-fp32"] == "runtime-timed"
    faster = config(packages=("fp32",), ms={**near, "aoti-cpu-fp32": 7.0}, precision="fp32")
    assert names(plan(faster, host())) == ["aoti-cpu-fp32", "torchscript-fp32"]
    pinned = config(packages=("fp32",), ms=near, runtime="aoti")
    assert names(plan(pinned, host())) == ["aoti-cpu-fp32", "torchscript-fp32"]  # the setting wins
    untimed = config(packages=("fp32",), ms={}, precision="fp32")
    assert names(plan(untimed, host())) == ["aoti-cpu-fp32", "torchscript-fp32"]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"batch_size": 16}, "export-bound"),
        ({"flags": frozenset({"sse4_2"})}, "cpu-flags"),
        ({"files": frozenset({"model.pt"})}, "missing-file"),
    ],
)
def test_a_package_this_worker_cannot_run_is_passed_over_saying_why(
    change: dict[str, Any], code: str
) -> None:
    planned = plan(config(precision="bf16"), host(**change))
    assert names(planned) == ["torchscript-bf16", "torchscript-fp32"]
    assert codes(planned)["aoti-cpu-bf16"] == code


def test_failed_and_ungated_candidates_are_never_planned() -> None:
    failed = plan(config(precision="bf16", failed_gates=["torchscript-bf16"]), host())
    assert "torchscript-bf16" not in names(failed) and codes(failed)["torchscript-bf16"] == "failed-gates"
    by_torchscript = plan(config(precision="bf16", runtime="torchscript"), host())
    assert names(by_torchscript) == ["torchscript-bf16", "torchscript-fp32"]
    assert codes(by_torchscript)["aoti-cpu-bf16"] == "runtime-set"


def test_explicit_precisions_the_hardware_lacks() -> None:
    emulated = plan(config(precision="bf16"), host(flags=AVX2))
    assert emulated.first.precision == "bf16" and "lacks it natively" in emulated.reasons[0].detail
    gpu_int8 = plan(config(precision="int8"), host(device_type="cuda", cuda_bf16=True))
    assert "int8 is CPU-only" in gpu_int8.reasons[0].detail and gpu_int8.first.name == "torchscript-bf16"
    gpu_bf16 = plan(config(precision="bf16"), host(device_type="cuda", cuda_bf16=False))
    assert gpu_bf16.reasons[0].detail == "bf16 set in the archive, unsupported on this GPU: fp16"


def test_the_plan_is_the_same_for_every_worker() -> None:
    assert plan(config(), host()) == plan(config(), host())


def test_benchmark_rows_follow_the_same_rules() -> None:
    rows, skipped = runnable_rows(config(packages=("bf16", "int8"), ms=INT8_FAST), host(flags=AVX2))
    assert [row.name for row in rows] == ["torchscript-fp32"]
    assert {reason.candidate: reason.code for reason in skipped} == {
        "aoti-cpu-bf16": "emulated",
        "aoti-cpu-int8": "emulated",
        "torchscript-bf16": "emulated",
    }
    rows, _ = runnable_rows(config(packages=("bf16", "int8"), ms=INT8_FAST), host(batch_size=16))
    assert [row.name for row in rows] == ["torchscript-fp32", "torchscript-bf16"]


def program_only(
    packages: tuple[str, ...] = ("fp32", "bf16"), ms: dict[str, float] | None = None, **fields: Any
):
    """An archive built from an exported program that does not trace into TorchScript: no
    model.pt, no TorchScript record or timing, only its packages."""
    built = [ServingCandidate("aoti", "cpu", p) for p in packages]
    timed = {"aoti-cpu-fp32": 9.0, "aoti-cpu-bf16": 11.0} if ms is None else ms
    values = {
        "model_file": "",
        "compiled_models": [c.file_name for c in built],
        "check_outputs": {c.name: [[1.0]] for c in built},
        "timings_ms": {"cpu_model": XEON, "batch_size": 8, "ms": timed},
        **fields,
    }
    return config(packages, **values)


def test_without_torchscript_the_fastest_package_serves_and_the_others_follow() -> None:
    planned = plan(program_only(), host())
    assert names(planned) == ["aoti-cpu-fp32", "aoti-cpu-bf16"]  # no margin to beat, nothing after
    assert [reason.code for reason in planned.reasons[:2]] == ["measured", "no-torchscript"]
    assert "the fastest serves" in planned.reasons[0].detail
    by_flags = plan(program_only(), host(cpu_model=OTHER))  # native bf16 first, fp32 next
    assert names(by_flags) == ["aoti-cpu-bf16", "aoti-cpu-fp32"]
    assert codes(by_flags)[""] == "no-torchscript"
    pinned = plan(program_only(), host(cpu_model=OTHER, precision_setting="fp32"))
    assert names(pinned) == ["aoti-cpu-fp32", "aoti-cpu-bf16"]


def test_without_torchscript_a_batch_beyond_the_export_bound_runs_the_package_in_slices() -> None:
    planned = plan(program_only(), host(batch_size=32))
    assert names(planned) == ["aoti-cpu-fp32", "aoti-cpu-bf16"]
    assert "batches of 32 run in slices of 8" in next(
        r.detail for r in planned.reasons if r.code == "no-torchscript"
    )


def test_without_torchscript_a_host_that_can_run_no_package_gets_an_empty_plan_saying_why() -> None:
    planned = plan(program_only(), host(flags=frozenset({"sse4_2"})))
    assert planned.candidates == ()
    assert codes(planned)["aoti-cpu-fp32"] == codes(planned)["aoti-cpu-bf16"] == "cpu-flags"
    with pytest.raises(
        NothingToServeError, match="no TorchScript model and none of its AOTInductor packages"
    ):
        assert planned.first is None
    gpu = plan(program_only(), host(device_type="cuda", cuda_bf16=True))
    assert gpu.candidates == () and "rebuild it on a machine like this one" in nothing_to_serve(gpu)


def test_without_torchscript_benchmark_rows_are_the_packages() -> None:
    rows, skipped = runnable_rows(program_only(), host(flags=AVX2))
    assert [row.name for row in rows] == ["aoti-cpu-fp32"]
    assert {reason.candidate: reason.code for reason in skipped} == {"aoti-cpu-bf16": "emulated"}
