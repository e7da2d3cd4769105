"""What one load-generator process knows about the current test, shared by the Locust event
listeners (:mod:`tsbatch.locust.plugin`), the users (``loadtest/locustfile.py``) and the web UI
(:mod:`tsbatch.locust.webui`).

Plain Python (no Locust import), so the web UI's rows are unit-tested on a real state.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from tsbatch.archive.traffic import Traffic, traffic_for
from tsbatch.locust.options import RunConfig
from tsbatch.locust.recorder import SampleRecorder
from tsbatch.locust.server_view import ServerView
from tsbatch.sla import gate

logger = logging.getLogger("loadtest")


@dataclass
class LoadTestState:
    """Samples, configuration, token, workloads and the server view of this process's test."""

    recorder: SampleRecorder = field(default_factory=SampleRecorder)
    config: RunConfig | None = None
    config_error: str | None = None
    token: str | None = None
    workloads: dict[str, Traffic] = field(default_factory=dict)
    test_started: bool = False
    final: list[gate.Verdict] | None = None
    server_view: ServerView | None = None

    def use_config(self, config: RunConfig | None, error: str | None = None) -> None:
        """A new configuration (or why there is none); workloads built for other requests or
        another answer check are dropped, so the web UI's next test reads the new ones."""
        old = self.config
        if (
            old is None
            or config is None
            or (old.requests, old.answer_schema) != (config.requests, config.answer_schema)
        ):
            self.workloads.clear()
        self.config, self.config_error = config, error

    def workload(self, model: str, seed: int) -> Traffic:
        """Built once per process, from the configuration's ``--requests`` and answer check."""
        if model not in self.workloads:
            started = time.perf_counter()
            config = self.config
            self.workloads[model] = workload = traffic_for(
                model,
                seed,
                None if config is None else config.requests.get(model),
                "" if config is None else config.answer_schema,
            )
            logger.info(
                "%s: %d payloads (%s) ready in %.1f s",
                model,
                len(workload.payloads),
                workload.source,
                time.perf_counter() - started,
            )
        return self.workloads[model]

    def live_verdicts(self) -> tuple[list[gate.Verdict], gate.Window]:
        """Verdicts over the window so far (none while the configuration is unusable), with the
        server's figures over the same window when they could be scraped."""
        window = self.recorder.window()
        if self.config is None:
            return [], window
        server = None if self.server_view is None else self.server_view.figures(window)
        verdicts = gate.evaluate_all(
            self.recorder.samples, self.config.slas, self.config.models, window, server
        )
        return verdicts, window

    def server_summary(self, window: gate.Window) -> dict[str, object]:
        """What ``sla.json`` says about the server view, including why it is missing."""
        if self.server_view is None:
            return {"available": False, "reason": "the server view did not run"}
        return self.server_view.summary(window)
