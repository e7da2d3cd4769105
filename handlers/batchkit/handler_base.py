"""The TorchServe adapter every model handler builds on.

A subclass says how to load its model, decode one request, run a list of decoded items
and encode one output. This class runs them through the batch core
(``batching.run_batch``) and does the rest: config and labels, per-request errors through
``context.set_response_status``, metrics, and the guarantee that ``handle`` returns
exactly one response per request and never raises.
"""

from __future__ import annotations

import abc
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic

import torch

from batchkit.batching import decode_each, run_batch
from batchkit.binary_tensors import BINARY_CONTENT_TYPE, HEADER_LENGTH, BinaryBody, header_length_of
from batchkit.config import ConfigT, from_mapping
from batchkit.deadlines import DeadlinePolicy
from batchkit.errors import DeadlineExceeded, RequestError, error_for_exception
from batchkit.flatten import flatten, regroup
from batchkit.loader import ServedModel
from batchkit.metrics import BatchReport, emit
from batchkit.precision import require_cuda
from batchkit.protocols import ErrorReply, InputSchema, Protocol, compose_response, error_body, parse_request
from batchkit.worker import configure_threads, select_device

logger = logging.getLogger(__name__)

JSON_CONTENT_TYPE = "application/json"


def is_describe_call(context: Any) -> bool:
    """TorchServe's frontend marks a ``?customized=true`` describe call with this header."""
    get_header = getattr(context, "get_request_header", None)
    return get_header is not None and get_header(0, "describe") == "True"


class BatchHandler(abc.ABC, Generic[ConfigT]):
    """Base for the toolkit's handlers; subclasses stay small and model-specific."""

    config_type: type[ConfigT]
    input_schema: InputSchema

    def __init__(self) -> None:
        self.initialized = False
        self.config: ConfigT
        self.device = torch.device("cpu")
        self.model_dir = Path(".")
        self.max_batch_size = 1
        self.labels: list[str] = []
        self.top_k = 0
        self.last_report: BatchReport | None = None
        self.deadlines = DeadlinePolicy()

    # ---- TorchServe entry points -------------------------------------------------
    def initialize(self, context: Any) -> None:
        properties = context.system_properties
        self.model_dir = Path(properties.get("model_dir") or ".")
        model_yaml = context.model_yaml_config or {}
        if "handler" not in model_yaml:
            raise ValueError("archive has no handler section in model-config.yaml")
        self.config = from_mapping(self.config_type, model_yaml["handler"])
        self.max_batch_size = int(properties.get("batch_size") or model_yaml.get("batchSize") or 1)
        configure_threads(self.config.torch_threads)
        self.device = select_device(properties)
        require_cuda(self.device)
        self.labels = json.loads((self.model_dir / self.config.labels_file).read_text())
        self.top_k = min(self.config.top_k, len(self.labels))
        self.load()
        self.warm_up()
        self.deadlines = DeadlinePolicy(
            budget_ms=self.config.deadline_budget_ms,
            batch_delay_ms=float(model_yaml.get("maxBatchDelay", 100)),
            idle_since_ms=time.time() * 1000,  # a request queued while it loaded arrived before this
        )
        self.initialized = True
        logger.info(
            "%s ready on %s (batch size %d, %d threads)",
            type(self).__name__,
            self.device,
            self.max_batch_size,
            torch.get_num_threads(),
        )

    def handle(self, data: list[Any], context: Any) -> list[Any]:
        if is_describe_call(context):
            return [json.dumps(self.describe())]
        now_ms = time.time() * 1000  # deadlines are Unix times: the wall clock, not a monotonic one
        headers = [request_headers(context, index) for index in range(len(data))]
        try:
            responses, report = self.process(
                data,
                [header_length_of(each) for each in headers],
                lambda inputs: self.deadlines.verdicts(headers, now_ms, inputs),
            )
        except Exception as exc:
            logger.exception("batch failed outside the per-request pipeline")
            error = error_for_exception(exc)
            # The requests may not even have been read: each is answered in our own shape.
            responses = [ErrorReply(error, error_body(error, Protocol.SINGLE)) for _ in data]
            report = BatchReport(batch_size=len(data), max_batch_size=self.max_batch_size)
        self.last_report = report
        bodies = [self.respond(context, index, value) for index, value in enumerate(responses)]
        emit(getattr(context, "metrics", None), self.model_name, report)
        # What the model ran on teaches the policy how long a batch takes: the whole call,
        # parsing and answering included, since a deadline is met or missed by all of it.
        ended_ms = time.time() * 1000
        self.deadlines.observe(ended_ms - now_ms, report.inputs - report.rejected_inputs, ended_ms)
        return bodies

    # ---- pipeline ---------------------------------------------------------------
    def process(
        self,
        data: list[Any],
        header_lengths: list[str | None] | None = None,
        verdicts: Callable[[list[int]], list[RequestError | None]] | None = None,
    ) -> tuple[list[Any], BatchReport]:
        """The batch core on this handler's stages, and the report of what it did.

        Every input of every request is flattened into one model batch, run once, and
        regrouped into each request's response, in the request's own protocol.
        ``header_lengths`` holds each request's Inference-Header-Content-Length header;
        ``verdicts``, given each request's number of inputs, the error each request's deadline
        answers it with before any decode (``deadlines.DeadlinePolicy``), or None to compute it.
        """
        lengths = header_lengths or [None] * len(data)
        limit = self.config.max_inputs_per_request
        parsed = [
            parse_request(request, self.input_schema, limit, self.model_name, length)
            for request, length in zip(data, lengths, strict=True)
        ]
        answered_early = {
            index: verdict
            for index, verdict in enumerate(
                verdicts([len(request.inputs) for request in parsed]) if verdicts else [None] * len(data)
            )
            if verdict is not None and parsed[index].error is None  # a bad envelope keeps its own error
        }
        for index, verdict in answered_early.items():  # answered in its own protocol, never decoded
            parsed[index] = replace(parsed[index], inputs=[], error=verdict)
        flat = flatten([request.inputs for request in parsed])
        run = run_batch(flat.inputs, self.decode_batch, self.infer_guarded, self.encode)
        responses = [
            compose_response(request, results, self.model_name)
            for request, results in zip(parsed, regroup(run.responses, flat.spans), strict=True)
        ]
        report = BatchReport(
            batch_size=len(data),
            max_batch_size=self.max_batch_size,
            rejected_requests=sum(isinstance(response, ErrorReply) for response in responses),
            inputs=len(flat.inputs),
            rejected_inputs=run.rejected_inputs,
            preprocess_ms=run.decode_ms,
            inference_ms=run.infer_ms,
            postprocess_ms=run.encode_ms,
            shed_requests=sum(error.code == DeadlineExceeded.code for error in answered_early.values()),
        )
        self.annotate(report, run.outputs)
        return responses, report

    def decode_batch(self, values: Sequence[Any]) -> list[Any]:
        """Every input of a batch decoded: an item or a RequestError each, in order (an input
        its envelope rejected stays rejected). Each on its own by default; a handler that
        decodes a batch together overrides this instead of ``decode``."""
        return decode_each(values, self.decode)

    def infer_guarded(self, items: list[Any]) -> list[Any]:
        try:
            with torch.inference_mode():
                return self.infer(items)
        except Exception:
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            raise

    def respond(self, context: Any, index: int, value: Any) -> Any:
        """Map one result to its HTTP status and body (errors mapped here only): JSON, or
        bytes with their header length when a v2 request asked for binary output."""
        if isinstance(value, ErrorReply):
            if context is not None:
                context.set_response_status(value.error.status, value.error.phrase, index)
                context.set_response_content_type(index, JSON_CONTENT_TYPE)
                if value.error.retry_after_s is not None:
                    context.set_response_header(index, "Retry-After", str(value.error.retry_after_s))
            return value.body
        if isinstance(value, BinaryBody):
            if context is not None:
                context.set_response_header(index, HEADER_LENGTH, str(value.header_length))
                context.set_response_content_type(index, BINARY_CONTENT_TYPE)
            return value.data
        if context is not None:
            context.set_response_content_type(index, JSON_CONTENT_TYPE)
        return value

    def warm_up(self) -> None:
        """Run the batch sizes traffic will bring before the first request does.

        TorchScript's profiling executor records shapes on the first calls and optimizes
        after them, so each size (the configured ones, powers of two and the maximum) runs
        twice; a size left cold costs its first real batch hundreds of milliseconds.
        """
        sizes = {min(size, self.max_batch_size) for size in self.config.warmup_batch_sizes}
        sizes |= {2**i for i in range(self.max_batch_size.bit_length()) if 2**i <= self.max_batch_size}
        sizes.add(self.max_batch_size)
        for size in sorted(sizes):
            started = time.perf_counter()
            with torch.inference_mode():
                for _ in range(2):
                    self.infer(self.warmup_items(size))
            logger.info("warm-up batch %d took %.1f ms", size, 1000 * (time.perf_counter() - started))

    def describe(self) -> dict[str, Any]:
        """What this worker serves and why: the management API returns it as the model's
        ``customizedMetadata`` (``GET /models/<m>?customized=true``)."""
        served = getattr(self, "model", None)
        decision = served.decision() if isinstance(served, ServedModel) else {}
        return {
            "model": self.model_name,
            "device": str(self.device),
            "batch_size": self.max_batch_size,
            "threads": torch.get_num_threads(),
            "pid": os.getpid(),
            **decision,
        }

    @property
    def model_name(self) -> str:
        return self.config.model_name

    def annotate(self, report: BatchReport, outputs: list[Any]) -> None:
        """Hook for handlers that add figures of the model's outputs (e.g. padding) to the
        batch's report; ``outputs`` is empty when the model did not run or failed."""

    # ---- what a model handler provides ---------------------------------------------
    @abc.abstractmethod
    def load(self) -> None:
        """Load the model and its side files from ``self.model_dir`` (labels are loaded)."""

    def decode(self, body: Any) -> Any:
        """One request body to one model-ready item; raise a RequestRejected when it is bad."""
        raise NotImplementedError(f"{type(self).__name__} overrides neither decode nor decode_batch")

    @abc.abstractmethod
    def infer(self, items: list[Any]) -> list[Any]:
        """Run the model on decoded items; return exactly one output per item, in order."""

    @abc.abstractmethod
    def encode(self, output: Any) -> Any:
        """One model output to its JSON-serializable response body."""

    @abc.abstractmethod
    def warmup_items(self, count: int) -> list[Any]:
        """Synthetic decoded items for warm-up."""


def request_headers(context: Any, index: int) -> dict[str, str]:
    """Request ``index``'s HTTP headers as TorchServe forwards them (every one, in the client's case)."""
    if context is None:
        return {}
    return dict(context.get_all_request_header(index) or {})
