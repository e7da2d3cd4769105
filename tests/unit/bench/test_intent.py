"""The intent benchmark's own parts: its settings and its summary (no server)."""

from __future__ import annotations

import pytest

from tsbatch.bench.intent import RunResult, parse_setting, runnable_rows, summarize


def test_settings_are_workers_x_threads() -> None:
    assert parse_setting("2x1") == (2, 1)
    assert parse_setting("1X2") == (1, 2)
    assert parse_setting("3") == (3, 1)


def result(handler: str, workers: int, rps: float, errors: int = 0) -> RunResult:
    return RunResult(handler, workers, 1, 16, 10.0, int(rps * 10), errors, rps, 10.0, 20.0, 30.0, 40.0)


def test_summary_compares_each_handler_at_its_best_error_free_setting() -> None:
    summary = summarize(
        [
            result("ours", 1, 200.0),
            result("usual", 1, 40.0),
            result("ours", 2, 320.0),
            result("usual", 2, 50.0, errors=3),
        ]
    )
    assert summary["best"]["ours"]["workers"] == 2
    assert summary["best"]["usual"]["workers"] == 1  # the faster run had errors
    assert summary["ratios"]["best_vs_best"] == pytest.approx(8.0)
    assert summary["ratios"]["1x1"] == pytest.approx(5.0)


def test_summary_gives_the_speedup_over_the_fp32_torchscript_row() -> None:
    summary = summarize([result("ours", 2, 300.0), result("fp32-ts", 2, 200.0)])
    assert summary["ratios"]["vs_fp32_ts_2x1"] == pytest.approx(1.5)
    assert "speedup vs fp32 TorchScript served at 2x1: 1.50x" in summary["lines"]


def test_a_pinned_row_this_machine_cannot_run_is_skipped_saying_why(tmp_path) -> None:
    from dataclasses import replace

    from batchkit.candidates import BASELINE, ServingCandidate
    from batchkit.planner import Host
    from tsbatch.archive import artifacts
    from tsbatch.archive.manifest import load_manifest

    spec = replace(load_manifest().model("bert_intent"), build_dir=tmp_path / "build")
    int8 = ServingCandidate("aoti", "cpu", "int8")
    artifacts.write_json(
        spec.artifact_dir / artifacts.HANDLER_CONFIG_FILE,
        {
            "precision": "auto",
            "runtime": "auto",
            "compiled_models": [int8.file_name],
            "compiled_max_batch_size": 8,
            "check_outputs": {"torchscript-bf16": [[1.0]]},
        },
    )
    vnni = Host(flags=frozenset({"avx512_vnni"}), files=frozenset({int8.file_name}))
    kept, missing = runnable_rows(["ours", "fp32-ts", "int8", "bf16", "usual"], spec, vnni)
    assert kept == {"ours": None, "fp32-ts": BASELINE, "int8": int8, "usual": None}
    assert [(r.candidate, r.code) for r in missing["bf16"]] == [("torchscript-bf16", "emulated")]
    kept, missing = runnable_rows(["int8"], spec, replace(vnni, flags=frozenset({"avx2"})))
    assert kept == {} and [(r.candidate, r.code) for r in missing["int8"]] == [(int8.name, "emulated")]
