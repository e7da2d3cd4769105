"""The SLA verdict as HTML: the web UI's server section and the headless run's report file.

One renderer for both, so the page a person watched and the file CI keeps agree. The report
is self-contained (inline CSS and SVG): it opens from disk with no network.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from tsbatch.locust.server_panels import figure_rows, model_charts
from tsbatch.locust.state import LoadTestState
from tsbatch.sla import gate

STYLE = """
 body { font-family: system-ui, sans-serif; margin: 2rem; color: #1d2330; }
 h1 { font-size: 1.4rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin: 1.4rem 0 .4rem; }
 table { border-collapse: collapse; min-width: 40rem; margin-bottom: .6rem; }
 th, td { text-align: left; padding: .3rem .8rem; border-bottom: 1px solid #d8dce6; }
 th { background: #eef1f6; }
 .PASS { color: #1a7f37; font-weight: 600; } .FAIL { color: #c62828; font-weight: 600; }
 .WAIT { color: #8a6d00; } .breaches { color: #c62828; }
 .why { color: #8a3b00; } .unavailable { color: #8a6d00; font-weight: 600; }
 .charts { display: flex; flex-wrap: wrap; gap: .8rem; }
 .charts svg { border: 1px solid #d8dce6; background: #fff; }
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], result_column: int | None = None) -> str:
    head = "".join(f"<th>{escape(title)}</th>" for title in header)
    body = []
    for cells in rows:
        tds = []
        for index, cell in enumerate(cells):
            css = f' class="{escape(cell)}"' if index == result_column else ""
            tds.append(f"<td{css}>{escape(cell)}</td>")
        body.append(f"<tr>{''.join(tds)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def server_section(state: LoadTestState, verdicts: Sequence[gate.Verdict], window: gate.Window) -> str:
    """Per model: why a latency target broke, TorchServe's figures over the window, the charts."""
    if state.config is None:
        return f'<p class="unavailable">No test configured: {escape(state.config_error or "")}</p>'
    view = state.server_view
    reason = "the server view did not run" if view is None else view.unavailable_reason(window)
    figures = {} if view is None else view.figures(window)
    parts = []
    if reason is not None:
        parts.append(
            f'<p class="unavailable">Server view unavailable: {escape(reason)}. '
            "The client figures still gate; server targets are not judged.</p>"
        )
    by_model = {verdict.model: verdict for verdict in verdicts}
    for model in state.config.models:
        parts.append(f'<section class="model" id="server-{escape(model)}"><h2>{escape(model)}: server</h2>')
        verdict = by_model.get(model)
        if verdict is not None and verdict.diagnosis:
            causes = "".join(f"<li>{escape(line)}</li>" for line in verdict.diagnosis)
            parts.append(f'<ul class="why">{causes}</ul>')
        model_figures = figures.get(model)
        if model_figures is not None:
            management_error = view.management_error if view is not None else None
            parts.append(_table(("Server figure", "Measured"), figure_rows(model_figures, management_error)))
        charts = model_charts(model, state.recorder.samples, state.config.slas.get(model), view, window)
        parts.append(f'<div class="charts">{"".join(charts)}</div></section>')
    return "".join(parts)


def report_page(state: LoadTestState, verdicts: Sequence[gate.Verdict], window: gate.Window) -> str:
    """The whole report: verdict table and breaches, then the server section with the diagnosis."""
    status = "PASS" if gate.gate_exit_code(verdicts) == 0 else "FAIL"
    profile = verdicts[0].profile if verdicts else "?"
    rows = [tuple(row.values()) for row in gate.table_rows(verdicts)]
    breaches = "".join(f"<li>{escape(line)}</li>" for line in gate.breach_summary(verdicts))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>SLA load test report</title>'
        f"<style>{STYLE}</style></head><body>"
        f'<h1>SLA gate: <span class="{status}">{status}</span></h1>'
        f"<p>Profile {escape(profile)} · measured window {window.seconds:.1f} s after the ramp-up "
        "(the shaded band in the charts) · exact nearest-rank percentiles.</p>"
        + _table(("Model", "Figure", "Target", "Measured", "Result"), rows, result_column=4)
        + (f'<ul class="breaches">{breaches}</ul>' if breaches else "")
        + server_section(state, verdicts, window)
        + "</body></html>"
    )


def write_report(
    path: Path, state: LoadTestState, verdicts: Sequence[gate.Verdict], window: gate.Window
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_page(state, verdicts, window))
    return path
