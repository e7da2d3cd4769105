"""The headless report: self-contained HTML with the verdict, the server section and its charts."""

from __future__ import annotations

from pathlib import Path

from tests.unit.locust.test_server_panels import scraped_state
from tsbatch.locust.report_html import write_report


def test_the_report_holds_verdict_server_figures_and_charts(tmp_path: Path) -> None:
    state = scraped_state()
    verdicts, window = state.live_verdicts()
    page = write_report(tmp_path / "loadtest" / "sla.html", state, verdicts, window).read_text()
    assert '<span class="FAIL">FAIL</span>' in page  # 20-29 ms against p50 <= 20 ms
    assert "resnet18: p50_ms = 24.0 ms, target &lt;= 20.0 ms" in page
    assert "2.50 of 8 (31% full)" in page and page.count("<svg") == 3
    # the breach's diagnosis, from the server figures (these scrapes carry no queue or stage times)
    assert "no queue or handler times: the cause cannot be read" in page
    assert "<script" not in page and "src=" not in page  # nothing to run or fetch


def test_the_report_says_when_the_server_view_is_missing(tmp_path: Path) -> None:
    state = scraped_state(unreachable="metrics endpoint http://m/metrics unreachable (ConnectionError)")
    verdicts, window = state.live_verdicts()
    page = write_report(tmp_path / "sla.html", state, verdicts, window).read_text()
    assert "Server view unavailable: metrics endpoint http://m/metrics unreachable (ConnectionError)" in page
    assert "The client figures still gate" in page and page.count("<svg") == 1
