"""int8 as a precision: the VNNI check and when the flag rule takes it; every branch forced
with the flags passed in, so it runs on any CPU (the planner's int8 rules: test_planner)."""

from __future__ import annotations

import pytest

from batchkit.precision import flag_precision, native_cpu_int8


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"avx2", "avx512_vnni"}, True),
        ({"avx2", "avx_vnni"}, True),
        ({"amx_int8", "amx_tile"}, True),
        ({"avx2", "fma", "avx512f"}, False),
        (set(), False),
    ],
)
def test_int8_is_native_with_vnni_or_amx_int8(flags: set[str], expected: bool) -> None:
    assert native_cpu_int8(flags) is expected


@pytest.mark.parametrize(
    ("flags", "ready", "expected"),
    [
        ({"avx512_vnni", "avx512_bf16"}, True, "int8"),
        ({"avx512_vnni", "avx512_bf16"}, False, "bf16"),  # not gated, or not faster at build
        ({"avx2"}, True, "fp32"),  # no VNNI: oneDNN int8 may saturate
        ({"avx512_bf16"}, True, "bf16"),
    ],
)
def test_the_flag_rule_takes_int8_only_with_vnni_and_a_gated_faster_package(
    flags: set[str], ready: bool, expected: str
) -> None:
    precision, reason = flag_precision("cpu", flags, int8_ready=ready)
    assert precision == expected
    assert ("VNNI" in reason) is (expected == "int8")
