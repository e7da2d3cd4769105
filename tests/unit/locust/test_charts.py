"""Server-side SVG charts: valid markup, one line per unbroken run, the window shaded, no network."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tsbatch.locust.charts import Series, level, line_chart

SVG = "{http://www.w3.org/2000/svg}"


def test_a_chart_is_standalone_svg_with_its_lines_targets_and_window() -> None:
    latency = Series("p99", "#cf222e", [(0.0, 120.0), (2.0, 340.0), (4.0, None), (6.0, 90.0), (8.0, 95.0)])
    svg = line_chart(
        "m: client latency (ms)",
        [latency, level("p99 target", "#cf222e", 300.0, (0.0, 8.0))],
        (0.0, 8.0),
        (2.0, 8.0),
    )
    root = ET.fromstring(svg)  # well-formed XML
    lines = root.findall(f"{SVG}polyline[@class='series']")
    assert [line.get("data-label") for line in lines] == ["p99", "p99", "p99 target"]  # the gap splits p99
    assert len(lines[0].get("points", "").split()) == 2 and "stroke-dasharray" in lines[2].attrib
    assert root.find(f"{SVG}rect") is not None  # the measured window
    labels = [text.text for text in root.iter(f"{SVG}text")]
    assert "m: client latency (ms)" in labels and "target" in labels and "p99" in labels
    assert "400" in labels  # round y ticks up to a round top above 340
    assert "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing to fetch


def test_titles_are_escaped_and_a_lone_point_is_a_dot() -> None:
    svg = line_chart("<model>", [Series("mean", "#000", [(1.0, 2.0)])], (0.0, 4.0))
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}circle") is not None
    assert "&lt;model&gt;" in svg


def test_a_target_far_above_the_data_is_named_not_drawn() -> None:
    latency = Series("p99", "#cf222e", [(0.0, 120.0), (2.0, 340.0)])
    svg = line_chart("m", [latency, level("p99 target", "#cf222e", 60000.0, (0.0, 2.0))], (0.0, 2.0))
    root = ET.fromstring(svg)
    assert [line.get("data-label") for line in root.findall(f"{SVG}polyline[@class='series']")] == ["p99"]
    labels = [text.text for text in root.iter(f"{SVG}text")]
    assert "targets above" in labels and "400" in labels  # scaled to the data
