"""The load test's command-line options and the run settings read back from them.

Kept free of Locust imports so they unit-test cleanly (importing locust monkey-patches the
whole process with gevent); :mod:`tsbatch.locust.plugin` registers :func:`add_options`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsbatch.archive.manifest import load_manifest
from tsbatch.archive.traffic import unknown_models, unknown_models_message
from tsbatch.client.auth import DEFAULT_KEY_FILE, management_token
from tsbatch.config.properties import read_properties
from tsbatch.locust.server_view import ServerEndpoints
from tsbatch.locust.shapes import SHAPES, ShapeParams
from tsbatch.paths import DEFAULT_PROPERTIES, DEFAULT_SLA_FILE
from tsbatch.sla.profiles import Sla, add_target_options, option_targets, slas_for
from tsbatch.workloads.requests_files import add_requests_options, parse_requests_specs

# TorchServe's own defaults, for a checkout whose config.properties lacks the addresses.
DEFAULT_ADDRESSES = {
    "metrics_address": "http://127.0.0.1:8082",
    "management_address": "http://127.0.0.1:8081",
}


def default_mix() -> str:
    """Every model of models.yaml, weighing 1."""
    return ",".join(f"{model}=1" for model in load_manifest().models)


def add_options(parser: Any) -> None:
    """The load test's own options, next to Locust's (``include_in_web_ui`` is Locust's extension)."""
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
        "--mix",
        default="",
        help="traffic weights per model, e.g. resnet18=3,bert_intent=1 (default: every model of models.yaml)",
    )
    parser.add_argument("--model", default="", help="the one model under test (instead of --mix)")
    add_requests_options(parser)
    add_target_options(parser)
    parser.add_argument(
        "--mode",
        choices=["closed", "open"],
        default="closed",
        help="closed: each user waits for its answer before the next request; open: requests on a schedule",
    )
    parser.add_argument(
        "--no-deadlines",
        action="store_true",
        default=False,
        help="send no X-Request-Deadline-Ms (by default each request's deadline is its model's p99 target from now)",
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
        "--shape", choices=list(SHAPES), default="steady", help="load shape (see docs/loadtest.md)"
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
    parser.add_argument(
        "--metrics-url", default="", help="TorchServe metrics address (empty: config.properties)"
    )
    parser.add_argument(
        "--management-url", default="", help="TorchServe management address (empty: config.properties)"
    )
    parser.add_argument(
        "--server-scrape-interval", type=float, default=2.0, help="seconds between server scrapes"
    )
    parser.add_argument(
        "--sla-html", default="", include_in_web_ui=False, help="write the HTML report to this file"
    )


def parse_mix(text: str) -> dict[str, float]:
    """``"resnet18=3,bert_intent=1"`` -> weights; a bare model name weighs 1; weight 0 drops it."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        try:
            value = float(weight) if weight.strip() else 1.0
        except ValueError as exc:
            raise ValueError(f"--mix: weight of {name.strip()!r} is not a number: {weight!r}") from exc
        if value < 0:
            raise ValueError(f"--mix: weight of {name.strip()!r} is negative")
        if value > 0:
            mix[name.strip()] = value
    if not mix:
        raise ValueError(f"--mix {text!r} selects no model")
    return mix


@dataclass(frozen=True)
class RunConfig:
    """What one test run is held to: the SLA of every model in the traffic mix."""

    mix: dict[str, float]
    slas: dict[str, Sla]
    requests: dict[str, Path] = field(default_factory=dict)  # --requests: the user's bodies per model
    answer_schema: str = ""

    @property
    def models(self) -> list[str]:
        return list(self.mix)


def traffic_mix(options: Any) -> dict[str, float]:
    """``--model NAME`` is a one-model mix; otherwise ``--mix`` (default: the toolkit's models)."""
    if options.model and options.mix:
        raise ValueError("give --model (one model) or --mix (several), not both")
    return {options.model.strip(): 1.0} if options.model else parse_mix(options.mix or default_mix())


def run_config(options: Any) -> RunConfig:
    """The mix, every model's SLA (file, then command-line targets) and the user's requests.
    A model needs an SLA and either ``--requests`` or an entry in the toolkit's manifest."""
    mix = traffic_mix(options)
    requests = parse_requests_specs(options.requests, options.model or None, list(mix))
    unknown = unknown_models(mix, requests)
    if unknown:
        raise ValueError(unknown_models_message(unknown))
    targets = option_targets(vars(options))
    slas = slas_for(mix, options.sla_profile or None, Path(options.sla_file), targets)
    return RunConfig(mix, slas, requests, options.answer_schema or "")


def shape_params(options: Any) -> ShapeParams:
    return ShapeParams(
        kind=options.shape,
        users=int(options.num_users or 1),
        spawn_rate=float(options.spawn_rate or 1),
        run_time=float(options.run_time) if options.run_time else None,
        step_users=options.step_users,
        step_time=options.step_time,
        spike_users=options.spike_users,
        spike_at=options.spike_at,
        spike_time=options.spike_time,
    )


def _configured(properties: Path) -> dict[str, str]:
    try:
        return read_properties(properties)
    except OSError:
        return {}


def server_endpoints(options: Any, properties: Path = DEFAULT_PROPERTIES) -> ServerEndpoints:
    """Where the server view reads: the options, else config.properties, else TorchServe's defaults."""
    configured = _configured(properties)
    addresses = {key: configured.get(key, default) for key, default in DEFAULT_ADDRESSES.items()}
    token, source = management_token(options.key_file)
    return ServerEndpoints(
        metrics_url=options.metrics_url or addresses["metrics_address"],
        management_url=options.management_url or addresses["management_address"],
        management_token=token,
        token_source=source,
    )


def server_view_refusal(options: Any, host: str | None, properties: Path = DEFAULT_PROPERTIES) -> str | None:
    """Why not to scrape config.properties' addresses: the test targets another server (``--host``),
    whose figures they would not be. ``None`` when the addresses are given or match the host."""
    if options.metrics_url or not host:
        return None
    inference = _configured(properties).get("inference_address", "http://127.0.0.1:8080")
    if host.rstrip("/") == inference.rstrip("/"):
        return None
    return (
        f"--host {host} is not the inference_address of config.properties ({inference}): "
        "give --metrics-url (and --management-url) of that server"
    )
