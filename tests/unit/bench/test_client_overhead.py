"""The client-overhead benchmark, run very short against its own local server."""

from __future__ import annotations

import requests

from tsbatch.bench.client_overhead import (
    ANSWER_BODY,
    ClientCost,
    format_costs,
    local_server,
    raw_socket_cost,
    requests_cost,
)


def test_both_clients_are_measured_against_the_local_server() -> None:
    with local_server() as url:
        assert requests.post(url, data=b"{}", timeout=10).content == ANSWER_BODY
        ours = raw_socket_cost(url, concurrency=2, seconds=0.3)
        theirs = requests_cost(url, concurrency=2, seconds=0.3)
    for cost in (ours, theirs):
        assert cost.requests > 10 and cost.cpu_s > 0 and 0.25 < cost.seconds < 2
        assert cost.requests_per_s > 0 and cost.cpu_us_per_request > 0


def test_the_table_puts_the_clients_side_by_side_with_the_ratios() -> None:
    ours = ClientCost("raw", requests=1000, seconds=1.0, cpu_s=0.05)
    theirs = ClientCost("requests", requests=500, seconds=1.0, cpu_s=0.25)
    table = format_costs(ours, theirs)
    assert "raw" in table and "requests" in table
    assert "10.0x the CPU per request, 0.50x the request rate" in table
