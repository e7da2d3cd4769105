"""int8 as a precision: the VNNI check, when ``auto`` takes it, and explicit overrides; every
branch forced with the flags passed in, so it runs on any CPU."""

from __future__ import annotations

import pytest
import torch

from batchkit.precision import choose_precision, int8_fallback, native_cpu_int8

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def no_environment_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TSBATCH_PRECISION", raising=False)


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


def test_auto_takes_int8_only_with_vnni_and_a_gated_faster_package() -> None:
    chosen = choose_precision("auto", CPU, native_bf16=True, int8_ready=True, native_int8=True)
    assert chosen.precision == "int8" and "VNNI" in chosen.reason
    assert (
        choose_precision("auto", CPU, native_bf16=True, int8_ready=False, native_int8=True).precision
        == "bf16"
    )
    assert (
        choose_precision("auto", CPU, native_bf16=False, int8_ready=True, native_int8=False).precision
        == "fp32"
    )
    assert (
        choose_precision("auto", CPU, native_bf16=True, int8_ready=True, native_int8=False).precision
        == "bf16"
    )


def test_explicit_int8_is_honoured_and_warned_about_without_vnni(caplog: pytest.LogCaptureFixture) -> None:
    with_vnni = choose_precision("int8", CPU, native_bf16=False, native_int8=True)
    assert (with_vnni.precision, with_vnni.reason) == ("int8", "set explicitly")
    assert "saturate" not in caplog.text
    without = choose_precision("int8", CPU, native_bf16=False, native_int8=False)
    assert without.precision == "int8" and "no VNNI" in without.reason
    assert "int8 set explicitly on a CPU without VNNI/AMX-int8" in caplog.text
    assert without.dtype == torch.float32  # the package takes fp32 inputs and quantizes inside


def test_the_environment_pins_bf16_over_an_int8_ready_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TSBATCH_PRECISION", "bf16")
    assert (
        choose_precision("auto", CPU, native_bf16=True, int8_ready=True, native_int8=True).precision == "bf16"
    )
    monkeypatch.setenv("TSBATCH_PRECISION", "int8")
    assert choose_precision("bf16", CPU, native_bf16=True, native_int8=True).precision == "int8"


def test_int8_on_cuda_is_chosen_as_auto(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert choose_precision("int8", torch.device("cuda", 0)).precision == "bf16"
    assert "int8 packages are CPU-only" in caplog.text


def test_without_an_int8_package_the_next_precision_is_bf16_where_native() -> None:
    assert int8_fallback(native_bf16=True) == "bf16"
    assert int8_fallback(native_bf16=False) == "fp32"
