"""Locust wiring for the SLA gate: event listeners that record exact samples, scrape the server
beside them and decide the exit code.

Imported by ``loadtest/locustfile.py``; everything that can be plain Python lives in
:mod:`tsbatch.locust.options`, :mod:`tsbatch.locust.state`, :mod:`tsbatch.locust.recorder`,
:mod:`tsbatch.locust.shapes`, :mod:`tsbatch.locust.server_view` and :mod:`tsbatch.sla.gate` instead.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import gevent
import requests
from gevent.event import Event
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from tsbatch.client.auth import inference_token
from tsbatch.locust.options import add_options, run_config, server_endpoints, server_view_refusal
from tsbatch.locust.report_html import write_report
from tsbatch.locust.server_panels import console_lines
from tsbatch.locust.server_view import ServerView
from tsbatch.locust.state import LoadTestState
from tsbatch.locust.webui import add_sla_views
from tsbatch.sla import gate, levels
from tsbatch.sla.profiles import SlaError

logger = logging.getLogger("loadtest")

CONFIG_ERROR_EXIT_CODE = 2

events.init_command_line_parser.add_listener(add_options)

STATE = LoadTestState()


class ServerScraper:
    """The greenlet that scrapes the server view every interval while a test runs, and once
    as the measured window opens, so the server's window starts on a scrape as the gate's does."""

    def __init__(self) -> None:
        self.greenlet: gevent.Greenlet | None = None
        self.wake = Event()

    def start(self, view: ServerView) -> None:
        self.stop()
        self.greenlet = gevent.spawn(self.run, view)

    def stop(self) -> None:
        """Wait for the greenlet to die, so no scrape of it overlaps the one that may follow."""
        if self.greenlet is not None:
            self.greenlet.kill(block=True, timeout=5)
            self.greenlet = None

    def run(self, view: ServerView) -> None:
        while True:
            if not view.scrape() and view.attempts == 1:
                logger.warning("server view: %s (the client figures still gate)", view.error)
            now, wait = time.time(), view.interval_s
            opens = STATE.recorder.window_opens()
            if opens is not None and now < opens < now + wait:
                wait = opens - now
            self.wake.wait(timeout=wait)
            self.wake.clear()


SCRAPER = ServerScraper()


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
    """Validate the options (headless: exit 2 on a mistake), pre-build workloads, add the UI view."""
    options = environment.parsed_options
    if options is None:
        return
    if environment.web_ui is not None:
        add_sla_views(environment, STATE)
    STATE.recorder.warmup_s = options.warmup
    try:
        configure(environment)
    except (SlaError, ValueError, OSError) as exc:
        STATE.use_config(None, str(exc))
        if not _is_worker(environment):
            logger.error("load test configuration: %s", exc)
            if options.headless:
                sys.exit(CONFIG_ERROR_EXIT_CODE)
        return
    if options.headless and not _is_worker(environment):
        preflight(environment)


def configure(environment: Any) -> None:
    """Read the options into the state and build every model's workload (a bad request file
    fails here), before the clock starts rather than inside the ramp-up."""
    options = environment.parsed_options
    STATE.use_config(run_config(options))
    if STATE.config is not None and not _is_master(environment):
        for model in STATE.config.models:
            STATE.workload(model, options.payload_seed)


@events.test_start.add_listener
def on_test_start(environment: Any, **_: Any) -> None:
    options = environment.parsed_options
    STATE.recorder.reset(warmup_s=options.warmup)
    STATE.final = None
    STATE.test_started = True
    try:  # the web UI may have changed the options since start-up
        configure(environment)
    except (SlaError, ValueError, OSError) as exc:
        STATE.use_config(None, str(exc))
        logger.error("load test configuration: %s", exc)
        if not _is_worker(environment) and environment.runner is not None:
            environment.process_exit_code = CONFIG_ERROR_EXIT_CODE
        return
    if not _is_master(environment):
        STATE.token, source = inference_token(options.key_file)
        logger.info("inference token: %s", source)
    if not _is_worker(environment):
        view = ServerView(server_endpoints(options), STATE.config.models, options.server_scrape_interval)
        STATE.server_view = view
        refusal = server_view_refusal(options, target_host(environment))
        if refusal:
            view.error = refusal
            logger.warning("server view off: %s", refusal)
        else:
            SCRAPER.start(view)


@events.spawning_complete.add_listener
def on_spawning_complete(user_count: int, **_: Any) -> None:
    STATE.recorder.ramp_up_done()
    if STATE.recorder.warmup_s <= 0:
        SCRAPER.wake.set()  # the window opens now: take its first scrape


@events.test_stop.add_listener
def on_test_stop(environment: Any, **_: Any) -> None:
    if SCRAPER.greenlet is not None and STATE.server_view is not None:
        SCRAPER.stop()
        STATE.server_view.scrape()  # the window's last scrape, before its end is set
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
    options = environment.parsed_options
    if options.sla_report:
        Path(options.sla_report).parent.mkdir(parents=True, exist_ok=True)
        Path(options.sla_report).write_text(
            gate.report_json(verdicts, window, STATE.server_summary(window)) + "\n"
        )
    if options.sla_html:
        write_report(Path(options.sla_html), STATE, verdicts, window)


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
    stats = levels.level_stats(STATE.recorder.samples, STATE.recorder.load_levels())
    if len(stats) > 1:
        print(levels.format_levels(stats))
    print("\n".join(console_lines(STATE.server_view, window)))
    print(gate.format_table(STATE.final, window))
    sys.stdout.flush()
