"""The SLA table in Locust's web UI, live while the test runs.

Two views of the same rows (:func:`tsbatch.sla.gate.table_rows`):

- an "SLA gate" tab in Locust's own UI (``/?tab=sla``): Locust 2.x renders extra tabs
  declared in ``template_args["extendedTabs"]``/``["extendedTables"]`` from the
  ``extended_stats`` list of its ``/stats/requests`` poll, which we append to;
- a standalone page at ``/sla`` (auto-refreshing from ``/sla/data``) with the overall
  verdict, for a second screen or a link in a runbook, and below it the server section
  (``/sla/server``: TorchServe's batching, queue and handler time, the charts as inline SVG).

The tab carries the server figures as rows too (its table cannot hold charts).
"""

from __future__ import annotations

import json
from typing import Any

from flask import Response, request

from tsbatch.locust.report_html import server_section
from tsbatch.locust.server_panels import server_rows
from tsbatch.locust.state import LoadTestState
from tsbatch.sla import gate

TAB_KEY = "sla"
COLUMNS = (
    ("model", "Model"),
    ("figure", "Figure"),
    ("target", "Target"),
    ("measured", "Measured"),
    ("result", "Result"),
)


def live_rows(state: LoadTestState) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Table rows plus a summary; results read WAIT while the ramp-up is still excluded."""
    verdicts, window = state.live_verdicts()
    rows = gate.table_rows(verdicts)
    waiting = window.start is None
    if waiting:
        for row in rows:
            row["measured"], row["result"] = "ramping up", "WAIT"
    if state.config_error:
        status = "CONFIG ERROR"
    elif waiting:
        status = "WAIT"
    else:
        status = "PASS" if gate.gate_exit_code(verdicts) == 0 else "FAIL"
    summary = {
        "status": status,
        "profile": verdicts[0].profile if verdicts else None,
        "window_s": round(window.seconds, 1),
        "requests": {v.model: v.measured.requests for v in verdicts},
        "breaches": [] if waiting else gate.breach_summary(verdicts),
        "error": state.config_error,
        "server": {v.model: None if v.server is None else v.server.as_dict() for v in verdicts},
    }
    status_row = {
        "model": "all models",
        "figure": "measured window",
        "target": "ramp-up excluded",
        "measured": "ramping up" if waiting else f"{window.seconds:.1f} s",
        "result": status,
    }
    return [status_row, *rows], summary


def add_sla_views(environment: Any, state: LoadTestState) -> None:
    """Declare the tab and add the ``/sla`` page and ``/sla/data`` to Locust's Flask app."""
    web_ui = environment.web_ui
    web_ui.template_args["extendedTabs"] = [{"title": "SLA gate", "key": TAB_KEY}]
    web_ui.template_args["extendedTables"] = [
        {"key": TAB_KEY, "structure": [{"key": key, "title": title} for key, title in COLUMNS]}
    ]
    app = web_ui.app

    @app.after_request
    def add_sla_rows(response: Response) -> Response:
        """Ride along on the UI's own stats poll, so the tab refreshes with everything else."""
        if not request.path.endswith("/stats/requests") or not response.is_json:
            return response
        document = response.get_json()
        rows, _ = live_rows(state)
        if state.server_view is not None:  # the tab has no room for the /sla page's server section
            rows += server_rows(state.server_view, state.recorder.window())
            rows.append(
                {
                    "model": "all models",
                    "figure": "server charts",
                    "target": "",
                    "measured": "/sla",
                    "result": "",
                }
            )
        document["extended_stats"] = [{"key": TAB_KEY, "data": rows}]
        response.set_data(json.dumps(document))
        return response

    @app.route("/sla/data")
    @web_ui.auth_required_if_enabled
    def sla_data() -> Response:
        rows, summary = live_rows(state)
        return Response(json.dumps({"rows": rows, **summary}), mimetype="application/json")

    @app.route("/sla/server")
    @web_ui.auth_required_if_enabled
    def sla_server() -> Response:
        verdicts, window = state.live_verdicts()
        return Response(server_section(state, verdicts, window), mimetype="text/html")

    @app.route("/sla")
    @web_ui.auth_required_if_enabled
    def sla_page() -> Response:
        return Response(SLA_PAGE, mimetype="text/html")


SLA_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>SLA gate</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 2rem; color: #1d2330; }
 h1 { font-size: 1.4rem; margin-bottom: .2rem; }
 #status { font-size: 1.1rem; margin: .6rem 0 1rem; }
 table { border-collapse: collapse; min-width: 60rem; }
 th, td { text-align: left; padding: .35rem .8rem; border-bottom: 1px solid #d8dce6; }
 th { background: #eef1f6; }
 .PASS { color: #1a7f37; font-weight: 600; } .FAIL { color: #c62828; font-weight: 600; }
 .WAIT { color: #8a6d00; } #breaches { color: #c62828; }
 h2 { font-size: 1.15rem; margin: 1.4rem 0 .4rem; } .why { color: #8a3b00; }
 .unavailable { color: #8a6d00; font-weight: 600; }
 .charts { display: flex; flex-wrap: wrap; gap: .8rem; } .charts svg { border: 1px solid #d8dce6; }
</style></head>
<body>
<h1>SLA gate</h1>
<div>Targets from the SLA profile; percentiles are exact nearest-rank values over the requests sent
after the ramp-up (plus --warmup). <a href="./">Back to Locust</a></div>
<div id="status">loading…</div>
<table><thead><tr><th>Model</th><th>Figure</th><th>Target</th><th>Measured</th><th>Result</th></tr></thead>
<tbody id="rows"></tbody></table>
<ul id="breaches"></ul>
<div id="server"></div>
<script>
async function refresh() {
  try {
    const data = await (await fetch("sla/data", {cache: "no-store"})).json();
    const status = document.getElementById("status");
    status.className = data.status;
    status.textContent = `${data.status} · profile ${data.profile ?? "?"} · measured window ${data.window_s} s`
      + (data.error ? ` · ${data.error}` : "");
    const body = document.getElementById("rows");
    body.replaceChildren(...data.rows.map(row => {
      const tr = document.createElement("tr");
      for (const key of ["model", "figure", "target", "measured", "result"]) {
        const td = document.createElement("td");
        td.textContent = row[key];
        if (key === "result") td.className = row[key];
        tr.appendChild(td);
      }
      return tr;
    }));
    document.getElementById("breaches").replaceChildren(...data.breaches.map(text => {
      const li = document.createElement("li"); li.textContent = text; return li;
    }));
    // rendered and escaped by this server (tsbatch/locust/report_html.py): tables and inline SVG
    document.getElementById("server").innerHTML = await (await fetch("sla/server", {cache: "no-store"})).text();
  } catch (error) {
    document.getElementById("status").textContent = `no data: ${error}`;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body></html>
"""
