"""Locust wiring for the SLA gate: custom options, exact-sample recording, verdict and exit code.

Imported by ``loadtest/locustfile.py``; everything that can be a plain function lives in
:mod:`tsbatch.sla.gate`, :mod:`tsbatch.locust.recorder` and :mod:`tsbatch.locust.shapes` instead.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from tsbatch.client.auth import DEFAULT_KEY_FILE, inference_token
from tsbatch.locust.options import DEFAULT_MIX, RunConfig, run_config
from tsbatch.locust.recorder import SampleRecorder
from tsbatch.locust.shapes import SHAPES
from tsbatch.sla import gate
from tsbatch.sla.profiles import DEFAULT_SLA_FILE, SlaError
from tsbatch.workloads.payloads import Payload, image_pool, read_utterances, text_pool

logger = logging.getLogger("loadtest")

CONFIG_ERROR_EXIT_CODE = 2


# ---------------------------------------------------------------- options
@events.init_command_line_parser.add_listener
def add_options(parser: Any) -> None:
    parser.add_argument("--sla-file", default=str(DEFAULT_SLA_FILE), help="SLA targets file")
    parser.add_argument(
        "--sla-profile",
        default="",
        help="SLA profile in the SLA file (empty: $SLA_PROFILE, then the file's default)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        help="seconds excluded after the ramp-up completes, on top of the ramp-up",
    )
    parser.add_argument(
        "--sla-report", default="", include_in_web_ui=False, help="write the verdict as JSON to this file"
    )
    parser.add_argument(
        "--mix", default=DEFAULT_MIX, help="traffic weights per model, e.g. resnet18=3,bert_intent=1"
    )
    parser.add_argument(
        "--mode",
        choices=["closed", "open"],
        default="closed",
        help="closed: each user waits for its answer before the next request; open: requests on a schedule",
    )
    parser.add_argument(
        "--think-time", type=float, default=0.0, help="closed loop: seconds between a user's requests"
    )
    parser.add_argument(
        "--user-rate",
        type=float,
        default=2.0,
        help="open loop: requests/s each user issues (Poisson arrivals)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=64,
        help="open loop: per-user cap; requests due beyond it count as errors",
    )
    parser.add_argument(
        "--shape", choices=list(SHAPES), default="steady", help="load shape (see loadtest/shapes.py)"
    )
    parser.add_argument(
        "--step-users", type=int, default=0, help="step shape: users added per step (0: users/4)"
    )
    parser.add_argument("--step-time", type=float, default=10.0, help="step shape: seconds per step")
    parser.add_argument(
        "--spike-users", type=int, default=0, help="spike shape: users at the peak (0: 3 x users)"
    )
    parser.add_argument(
        "--spike-at", type=float, default=0.0, help="spike shape: seconds in (0: run time / 3)"
    )
    parser.add_argument(
        "--spike-time", type=float, default=0.0, help="spike shape: seconds (0: run time / 6)"
    )
    parser.add_argument(
        "--key-file", default=str(DEFAULT_KEY_FILE), help="TorchServe key_file.json (TS_INFERENCE_TOKEN wins)"
    )
    parser.add_argument(
        "--payload-seed", type=int, default=0, include_in_web_ui=False, help="payload pool seed"
    )


# ---------------------------------------------------------------- per-process state
@dataclass
class LoadTestState:
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
        window = self.recorder.window()
        if self.config is None:
            return [], window
        return gate.evaluate_all(self.recorder.samples, self.config.slas, self.config.models, window), window


STATE = LoadTestState()


def _is_master(environment: Any) -> bool:
    return isinstance(environment.runner, MasterRunner)


def _is_worker(environment: Any) -> bool:
    return isinstance(environment.runner, WorkerRunner)


def target_host(environment: Any) -> str | None:
    if environment.host:
        return environment.host
    hosts = {user_class.host for user_class in environment.user_classes if user_class.host}
    return hosts.pop() if len(hosts) == 1 else None


def preflight(environment: Any) -> None:
    """Fail fast (exit 2) when nothing listens at the host, instead of a run of connection errors."""
    host = target_host(environment)
    if not host:
        return
    try:
        requests.get(f"{host.rstrip('/')}/ping", timeout=5)
    except requests.RequestException as exc:
        logger.error(
            "no TorchServe answers at %s (%s): start one with `make serve`", host, type(exc).__name__
        )
        sys.exit(CONFIG_ERROR_EXIT_CODE)


@events.init.add_listener
def on_init(environment: Any, **_: Any) -> None:
    """Validate the options (headless: exit 2 on a mistake), pre-build payloads, add the UI view."""
    options = environment.parsed_options
    if options is None:
        return
    if environment.web_ui is not None:
        from tsbatch.locust.webui import install  # Flask only where a web UI runs

        install(environment, STATE)
    STATE.recorder.warmup_s = options.warmup
    try:
        STATE.config = run_config(options)
    except (SlaError, ValueError, OSError) as exc:
        STATE.config_error = str(exc)
        if not _is_worker(environment):
            logger.error("load test configuration: %s", exc)
            if options.headless:
                sys.exit(CONFIG_ERROR_EXIT_CODE)
        return
    if options.headless and not _is_worker(environment):
        preflight(environment)
    if not _is_master(environment):
        for model in STATE.config.models:  # before the clock starts, not inside the ramp-up
            STATE.payloads_for(model, options.payload_seed)


@events.test_start.add_listener
def on_test_start(environment: Any, **_: Any) -> None:
    options = environment.parsed_options
    STATE.recorder.reset(warmup_s=options.warmup)
    STATE.final = None
    STATE.test_started = True
    try:  # the web UI may have changed the options since start-up
        STATE.config, STATE.config_error = run_config(options), None
    except (SlaError, ValueError, OSError) as exc:
        STATE.config, STATE.config_error = None, str(exc)
        logger.error("load test configuration: %s", exc)
        if not _is_worker(environment) and environment.runner is not None:
            environment.process_exit_code = CONFIG_ERROR_EXIT_CODE
        return
    if not _is_master(environment):
        STATE.token, source = inference_token(options.key_file)
        logger.info("inference token: %s", source)


@events.spawning_complete.add_listener
def on_spawning_complete(user_count: int, **_: Any) -> None:
    STATE.recorder.ramp_up_done()


@events.test_stop.add_listener
def on_test_stop(environment: Any, **_: Any) -> None:
    STATE.recorder.stopped()


@events.reset_stats.add_listener
def on_reset_stats(**_: Any) -> None:
    STATE.recorder.reset_samples()


@events.request.add_listener
def on_request(
    response_time: float | None,
    exception: BaseException | None,
    context: dict[str, Any] | None = None,
    start_time: float | None = None,
    **_: Any,
) -> None:
    """Every request of ours, with its exact (unrounded) response time."""
    model = (context or {}).get("sla_model")
    if model is None:
        return
    dropped = bool(context.get("dropped"))
    latency = None if dropped or response_time is None else float(response_time)
    sent = start_time if start_time is not None else time.time() - (latency or 0.0) / 1000
    STATE.recorder.record(model, sent, latency, exception is None)


@events.report_to_master.add_listener
def on_report_to_master(data: dict[str, Any], **_: Any) -> None:
    data["sla_samples"] = STATE.recorder.drain()


@events.worker_report.add_listener
def on_worker_report(data: dict[str, Any], **_: Any) -> None:
    STATE.recorder.extend(data.get("sla_samples", ()))


# ---------------------------------------------------------------- the verdict
@events.quitting.add_listener
def on_quitting(environment: Any, **_: Any) -> None:
    """Decide the exit code: any breach (or nothing measured) fails the run."""
    if _is_worker(environment) or not STATE.test_started:
        return  # a web UI closed before any test ran has nothing to judge
    if STATE.config is None:
        environment.process_exit_code = CONFIG_ERROR_EXIT_CODE
        return
    verdicts, window = STATE.live_verdicts()
    STATE.final = verdicts
    environment.process_exit_code = gate.gate_exit_code(verdicts)
    report = environment.parsed_options.sla_report
    if report:
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        Path(report).write_text(gate.report_json(verdicts, window) + "\n")


@events.quit.add_listener
def on_quit(exit_code: int, **_: Any) -> None:
    """Print the table after Locust's own statistics, so it is the last thing in a CI log."""
    if STATE.final is None:
        if STATE.config_error:
            print(f"SLA gate: not evaluated: {STATE.config_error}")
        elif not STATE.test_started and exit_code is not None:
            print("SLA gate: not evaluated (no test ran)")
        return
    window = STATE.recorder.window()
    levels = gate.level_stats(STATE.recorder.samples, STATE.recorder.load_levels())
    if len(levels) > 1:
        print(gate.format_levels(levels))
    print(gate.format_table(STATE.final, window))
    sys.stdout.flush()
