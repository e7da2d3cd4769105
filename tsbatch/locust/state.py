"""What one load-generator process knows about the current test, shared by the Locust event
listeners (:mod:`tsbatch.locust.plugin`), the users (``loadtest/locustfile.py``) and the web UI
(:mod:`tsbatch.locust.webui`).

Plain Python (no Locust import), so the web UI's rows are unit-tested on a real state.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from tsbatch.kinds.lookup import workload_for
from tsbatch.locust.options import RunConfig
from tsbatch.locust.recorder import SampleRecorder
from tsbatch.locust.server_view import ServerView
from tsbatch.sla import gate
from tsbatch.workloads.payloads import Payload
from tsbatch.workloads.workload import AnswerCheck

logger = logging.getLogger("loadtest")


@dataclass
class LoadTestState:
    """Samples, configuration, token, payload pools and the server view of this process's test."""

    recorder: SampleRecorder = field(default_factory=SampleRecorder)
    config: RunConfig | None = None
    config_error: str | None = None
    token: str | None = None
    payloads: dict[str, list[Payload]] = field(default_factory=dict)
    checks: dict[str, AnswerCheck] = field(default_factory=dict)
    test_started: bool = False
    final: list[gate.Verdict] | None = None
    server_view: ServerView | None = None

    def payloads_for(self, model: str, seed: int) -> list[Payload]:
        """The pool of the model's kind in models.yaml, built once per process (an unknown
        model is a clear error, not a pool of the wrong kind)."""
        if model not in self.payloads:
            started = time.perf_counter()
            self.payloads[model] = workload_for(model).pool(seed)
            logger.info(
                "%s: %d payloads ready in %.1f s",
                model,
                len(self.payloads[model]),
                time.perf_counter() - started,
            )
        return self.payloads[model]

    def answer_check(self, model: str) -> AnswerCheck:
        """How an answer of ``model`` is judged: its kind's check, looked up once per process."""
        if model not in self.checks:
            self.checks[model] = workload_for(model).answer_check(model)
        return self.checks[model]

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
