"""What one load-generator process knows about the current test, shared by the Locust event
listeners (:mod:`tsbatch.locust.plugin`), the users (``loadtest/locustfile.py``) and the web UI
(:mod:`tsbatch.locust.webui`).

Plain Python (no Locust import), so the web UI's rows are unit-tested on a real state.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from tsbatch.locust.options import RunConfig
from tsbatch.locust.recorder import SampleRecorder
from tsbatch.sla import gate
from tsbatch.workloads.payloads import Payload, image_pool, text_pool
from tsbatch.workloads.utterances import read_utterances

logger = logging.getLogger("loadtest")


@dataclass
class LoadTestState:
    """Samples, configuration, token and payload pools of this process's test."""

    recorder: SampleRecorder = field(default_factory=SampleRecorder)
    config: RunConfig | None = None
    config_error: str | None = None
    token: str | None = None
    payloads: dict[str, list[Payload]] = field(default_factory=dict)
    test_started: bool = False
    final: list[gate.Verdict] | None = None

    def payloads_for(self, model: str, seed: int) -> list[Payload]:
        """Built once per process; unknown models get the image pool (most vision models take images)."""
        if model not in self.payloads:
            started = time.perf_counter()
            if model == "bert_intent":
                self.payloads[model] = text_pool(read_utterances(), seed=seed)
            else:
                self.payloads[model] = image_pool(seed=seed)
            logger.info(
                "%s: %d payloads ready in %.1f s",
                model,
                len(self.payloads[model]),
                time.perf_counter() - started,
            )
        return self.payloads[model]

    def live_verdicts(self) -> tuple[list[gate.Verdict], gate.Window]:
        """Verdicts over the window so far (none while the configuration is unusable)."""
        window = self.recorder.window()
        if self.config is None:
            return [], window
        return gate.evaluate_all(self.recorder.samples, self.config.slas, self.config.models, window), window
