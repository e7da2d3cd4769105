"""The build report's section on serving candidates: every runtime x precision the build
gated, its figures beside fp32 TorchScript's, its verdict, int8's calibration and every
candidate's build timing (what ``auto`` serves by on a CPU of the same model). Both models' exports write it into their ``report.md``, so what decides what a
worker may serve is read in one place, not only in the build log."""

from __future__ import annotations

from pathlib import Path

from tsbatch.archive import artifacts
from tsbatch.archive.compiled import GateOutcome

HEADING = "## Serving candidates (precision and runtime gates)"


def cell(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def gates_section(outcome: GateOutcome) -> str:
    """The gates of ``outcome`` as a markdown section (a heading, a table, notes)."""
    names = list(dict.fromkeys(name for result in outcome.results for name in result.figures))
    lines = [HEADING, "", "| candidate | " + " | ".join(names) + " | verdict |"]
    lines.append("| --- " * (len(names) + 2) + "|")
    reference = [cell(outcome.reference_figures.get(name, "")) for name in names]
    if outcome.no_torchscript:
        row = "| eager fp32 (reference) | " + " | ".join(reference) + " | the reference, not served |"
    else:
        row = "| torchscript-fp32 (reference) | " + " | ".join(reference) + " | the reference, always built |"
    lines.append(row)
    for result in outcome.results:
        if result.passed:
            verdict = "PASS"
        else:
            verdict = "FAIL: " + "; ".join(result.failures)
            verdict += "" if outcome.enforced else " (not enforced: kept for timing)"
        figures = [cell(result.figures.get(name, "")) for name in names]
        lines.append(f"| {result.candidate} | " + " | ".join(figures) + f" | {verdict} |")
    if outcome.no_torchscript:
        served = ", ".join(outcome.compiled_models) or "nothing"
        lines += [
            "",
            f"**No TorchScript**: {outcome.no_torchscript}. The archive serves its packages that passed "
            f"({served}), the fastest by the timings below first; a worker that can run none of them "
            "fails loading and says why.",
        ]
    if outcome.skipped:
        lines += ["", "Not built: " + "; ".join(f"{t} ({why})" for t, why in outcome.skipped.items()) + "."]
    if outcome.int8:
        lines += ["", f"int8 quantization: {outcome.int8.get('calibration', 'not built')}."]
    timings = outcome.timings
    if timings.ms:
        lines += [
            "",
            f"Build timings on {timings.cpu_model}, ms per batch of {timings.batch_size}, fastest first:",
        ]
        lines += [f"- {name}: {ms:g}" for name, ms in sorted(timings.ms.items(), key=lambda item: item[1])]
    return "\n".join(lines) + "\n"


def write_gates_section(out_dir: Path, outcome: GateOutcome, model: str) -> Path:
    """Put the section at the end of ``out_dir/report.md`` (started with a title where
    the build wrote no report), replacing an earlier one."""
    path = out_dir / artifacts.REPORT_MARKDOWN
    text = path.read_text() if path.exists() else ""
    kept = text.split(HEADING, 1)[0].rstrip() or f"# Build report: {model}"
    path.write_text(kept + "\n\n" + gates_section(outcome))
    return path
