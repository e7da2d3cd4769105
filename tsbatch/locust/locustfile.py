"""Load test of the served models, gated on the latency/error/throughput SLAs of loadtest/sla.yaml.

Run it through ``tsbatch loadtest`` (headless, exit code = verdict; ``--ui`` for the web UI
with a live "SLA gate" tab), ``make loadtest`` or ``locust -f loadtest/locustfile.py``, which
re-exports these classes; docs/loadtest.md has the rest.

Two user classes send a weighted mix of requests (``--mix``) to every model; per request a
user picks a model, a payload from that model's pool and checks the answer's schema. A
quarter of the users (class weights) send several inputs per request. Two loops:

- ``--mode closed`` (default): each user sends, waits for the answer, (thinks), sends again.
  Its arrival rate drops as the server slows down, so it understates queueing.
- ``--mode open``: each user issues ``--user-rate`` requests/s on a Poisson schedule whether
  or not earlier answers came back (one greenlet per request), so a slow server builds a
  queue and the latency shows it. Total arrival rate = users x user-rate.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import gevent
from gevent.pool import Pool
from locust import FastHttpUser, LoadTestShape, task
from locust.exception import ResponseError

from batchkit.deadlines import DEADLINE_HEADER
from tsbatch.client.auth import auth_headers
from tsbatch.client.schedule import poisson_arrivals
from tsbatch.config.properties import read_properties
from tsbatch.locust.options import shape_params, traffic_mix
from tsbatch.locust.plugin import STATE
from tsbatch.locust.shapes import target
from tsbatch.paths import DEFAULT_PROPERTIES
from tsbatch.workloads.schemas import multi_input_problems

logger = logging.getLogger("loadtest")


def default_host() -> str:
    """The inference address of config.properties (what ``make serve`` listens on)."""
    try:
        return read_properties(DEFAULT_PROPERTIES)["inference_address"].rstrip("/")
    except (OSError, KeyError, ValueError):  # a stripped-down checkout: TorchServe's default
        return "http://127.0.0.1:8080"


class OpenLoopOverflow(ResponseError):
    """A request was due but the user already had --max-in-flight requests waiting."""


class TorchServeUser(FastHttpUser):
    """Sends the ``--mix`` of model requests, closed- or open-loop (``--mode``)."""

    weight = 3  # against MultiInputUser's 1: a quarter of the users send several inputs
    host = default_host()
    concurrency = 256  # connections per user; the open loop keeps up to --max-in-flight busy
    network_timeout = 120.0
    connection_timeout = 30.0

    def on_start(self) -> None:
        options = self.environment.parsed_options
        mix = traffic_mix(options)
        self.models, self.weights = list(mix), list(mix.values())
        self.rng = random.Random()
        self.headers = auth_headers(STATE.token)
        self.workloads = {model: STATE.workload(model, options.payload_seed) for model in self.models}
        self.payloads = {model: workload.payloads for model, workload in self.workloads.items()}
        self.in_flight: Pool | None = None

    def wait_time(self) -> float:
        return (
            self.environment.parsed_options.think_time
            if self.environment.parsed_options.mode == "closed"
            else 0
        )

    def on_stop(self) -> None:
        if self.in_flight is not None:
            self.in_flight.kill(block=False)

    @task
    def traffic(self) -> None:
        if self.environment.parsed_options.mode == "open":
            self.open_loop()
        else:
            self.send(self.pick_model())

    def pick_model(self) -> str:
        return self.rng.choices(self.models, self.weights)[0]

    def send(self, model: str) -> None:
        payload = self.rng.choice(self.payloads[model])
        with self.client.post(
            f"/predictions/{model}",
            data=payload.body,
            headers={**self.headers, "Content-Type": payload.content_type, **self.deadline(model)},
            name=self.stats_name(model),
            catch_response=True,
            context={"sla_model": model},
        ) as response:
            if not response.status_code:  # connection refused, reset, timeout
                response.failure(f"no answer: {getattr(response, 'error', None)}")
                return
            problems = self.problems(model, response.status_code, response.content)
            if problems:
                response.failure("; ".join(problems[:3]))
            else:
                response.success()

    def deadline(self, model: str) -> dict[str, str]:
        """The request's deadline header (its model's p99 target from now), unless --no-deadlines:
        the server sheds what would be too late anyway, and the 503 counts as an error."""
        slas = STATE.config.slas if STATE.config is not None else {}
        if self.environment.parsed_options.no_deadlines or model not in slas:
            return {}
        return {DEADLINE_HEADER: f"{slas[model].deadline_ms(time.time()):.0f}"}

    def stats_name(self, model: str) -> str:
        return model

    def problems(self, model: str, status: int, content: bytes | None) -> list[str]:
        return self.workloads[model].check(status, content)

    def open_loop(self) -> None:
        """Poisson arrivals at --user-rate per second, each request in its own greenlet."""
        options = self.environment.parsed_options
        rate = float(options.user_rate)
        if rate <= 0:
            raise ValueError("--user-rate must be > 0 in open mode")
        self.in_flight = Pool(max(1, int(options.max_in_flight)))
        behind_warned = False
        for due in poisson_arrivals(rate, time.monotonic(), self.rng):
            delay = due - time.monotonic()
            if delay > 0:
                gevent.sleep(delay)
            elif delay < -1.0 and not behind_warned:
                behind_warned = True
                logger.warning(
                    "load generator is %.1f s behind its arrival schedule: the numbers understate the load; "
                    "add --processes or a worker machine",
                    -delay,
                )
            model = self.pick_model()
            if self.in_flight.full():
                self.report_overflow(model)
            else:
                self.in_flight.spawn(self.send_logged, model)

    def send_logged(self, model: str) -> None:
        try:
            self.send(model)
        except gevent.GreenletExit:
            raise
        except Exception:
            logger.exception("request to %s failed in the load generator", model)

    def report_overflow(self, model: str) -> None:
        self.environment.events.request.fire(
            request_type="OVERFLOW",
            name=model,
            response_time=0,
            response_length=0,
            exception=OpenLoopOverflow(f"more than {self.in_flight.size} requests in flight for one user"),
            context={"sla_model": model, "dropped": True},
            start_time=time.time(),
        )


class MultiInputUser(TorchServeUser):
    """The same mix, each request carrying several inputs (our list, KServe v1 and v2 bodies
    in turn); they count towards their model's SLA like any request. The user's own
    ``--requests`` go out as they are: their handler may read one input per request only."""

    weight = 1
    inputs_per_request = 4

    def on_start(self) -> None:
        super().on_start()
        for model, traffic in self.workloads.items():
            if traffic.workload is not None:
                self.payloads[model] = traffic.workload.multi_input_pool(
                    traffic.payloads, self.inputs_per_request
                )

    def stats_name(self, model: str) -> str:
        return f"{model} x{self.inputs_per_request}" if self.workloads[model].several_inputs else model

    def problems(self, model: str, status: int, content: bytes | None) -> list[str]:
        input_check = self.workloads[model].input_check
        if input_check is None:
            return super().problems(model, status, content)
        return multi_input_problems(status, content, self.inputs_per_request, input_check)


class SlaShape(LoadTestShape):
    """Steady, step or spike (``--shape``), sized by the usual -u/-r/-t (so they show in the UI)."""

    use_common_options = True

    def __init__(self) -> None:
        super().__init__()
        self.last: tuple[int, float] | None = None

    def reset_time(self) -> None:
        """Locust calls this when a shape run starts: a new run, new load levels."""
        super().reset_time()
        self.last = None
        STATE.recorder.clear_levels()

    def tick(self) -> tuple[int, float] | None:
        options: Any = self.runner.environment.parsed_options
        result = target(shape_params(options), self.get_run_time())
        if result is not None and result != self.last:
            STATE.recorder.add_level(*result)
            self.last = result
        return result
