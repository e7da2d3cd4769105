"""Every ``tsbatch`` subcommand: its one-line summary, the function it runs and an example.

What a command runs is a ``module:function`` string, so listing the commands imports nothing heavy
(``tsbatch --help`` stays fast and never loads torch).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One subcommand; ``subcommands`` instead of ``runs`` makes it a group (``tsbatch bench resnet``)."""

    name: str
    summary: str
    examples: tuple[str, ...]
    runs: str = ""  # "module:function", called with the command's arguments
    action: str | None = None  # passed as ``action=`` to a main() that serves several actions
    subcommands: tuple[Command, ...] = ()


@dataclass(frozen=True)
class Alias:
    """An old command name, kept for one release: it runs ``words`` and the arguments given
    after a one-line notice naming ``instead``."""

    name: str
    words: tuple[str, ...]
    instead: str


GROUPS: tuple[tuple[str, tuple[Command, ...]], ...] = (
    (
        "Serve",
        (
            Command(
                "serve",
                "build what is missing, start TorchServe in the background, wait for READY",
                ("tsbatch serve", "tsbatch serve --run-dir .serve --timeout 600"),
                "tsbatch.cli.daemon:main",
                action="start",
            ),
            Command(
                "stop",
                "stop the TorchServe that `tsbatch serve` started",
                ("tsbatch stop",),
                "tsbatch.cli.daemon:main",
                action="stop",
            ),
            Command(
                "status",
                "show the models of the running server and what each worker serves",
                ("tsbatch status",),
                "tsbatch.cli.daemon:main",
                action="status",
            ),
            Command(
                "apply",
                "change batchSize, maxBatchDelay, workers of a model on the running server, no request failed",
                (
                    "tsbatch apply --model resnet18 --batch-size 16 --max-batch-delay 20",
                    "tsbatch apply --model bert_intent --workers 2 --run-dir .serve",
                ),
                "tsbatch.server.apply:main",
            ),
            Command(
                "loadtest",
                "Locust on the toolkit's locustfile, gated on loadtest/sla.yaml (headless unless --ui)",
                (
                    "tsbatch loadtest -u 8 -r 4 -t 30s --warmup 5 --only-summary",
                    "tsbatch loadtest --ui --web-host 127.0.0.1 --web-port 8089",
                ),
                "tsbatch.cli.loadtest:main",
            ),
        ),
    ),
    (
        "Check",
        (
            Command(
                "doctor",
                "what this machine offers (CPU flags, compiler, CUDA) and what a worker would serve",
                ("tsbatch doctor",),
                "tsbatch.machine:main",
            ),
            Command(
                "check-config",
                "explain mistakes in config.properties and models.yaml, and stale archives",
                ("tsbatch check-config", "tsbatch check-config --no-archives --strict"),
                "tsbatch.configcheck.check:main",
            ),
            Command(
                "container-config",
                "write or check the container and cluster configs derived from config.properties",
                ("tsbatch container-config --check",),
                "tsbatch.config.container_config:main",
            ),
            Command(
                "gpu-check",
                "serve every precision on the device and summarise (the Python half of scripts/gpu_check.sh)",
                (
                    "tsbatch gpu-check serve --device cuda --out reports/gpu-check",
                    "tsbatch gpu-check summary --out reports/gpu-check",
                ),
                "tsbatch.gpucheck.serving:main",
            ),
        ),
    ),
    (
        "Build",
        (
            Command(
                "archive",
                "export (when needed), verify and package every model of models.yaml into model-store/",
                ("tsbatch archive", "tsbatch archive --model resnet18 --force-export"),
                "tsbatch.archive.pipeline:main",
            ),
            Command(
                "package",
                "repackage exported models with the settings of config.properties (seconds)",
                ("tsbatch package", "tsbatch package --model bert_intent"),
                "tsbatch.archive.package:main",
            ),
            Command(
                "plugins",
                "compile the TorchServe frontend plugins (plugins/*) into build/plugins/",
                ("tsbatch plugins",),
                "tsbatch.archive.plugins:main",
            ),
            Command(
                "export",
                "export and verify one model of models.yaml into build/<model>/ (its kind adds options)",
                (
                    "tsbatch export --model resnet18 --weights W.pth --labels labels.txt",
                    "tsbatch export --model bert_intent --weights /models/my-classifier --test my_test.csv",
                ),
                "tsbatch.archive.export:main",
            ),
            Command(
                "text",
                "the text kind's own jobs: train a classifier, split the intent data",
                ("tsbatch text train --out build/intent_check --strict", "tsbatch text split --check"),
                subcommands=(
                    Command(
                        "train",
                        "train a text classifier and write its report, without packaging",
                        ("tsbatch text train --out build/intent_check --strict",),
                        "tsbatch.kinds.text.cli:main",
                    ),
                    Command(
                        "split",
                        "split data/intents/raw into the committed train/val/test files",
                        ("tsbatch text split --check",),
                        "tsbatch.kinds.text.split:main",
                    ),
                ),
            ),
        ),
    ),
    (
        "Analyse",
        (
            Command(
                "sweep",
                "in-process batch-size sweep of the exported models into reports/sweep/",
                ("tsbatch sweep --model resnet18 --max-batch 8 --iters 5",),
                "tsbatch.analysis.sweep.cli:main",
            ),
            Command(
                "tune",
                "SLA-driven batchSize x maxBatchDelay x workers search through TorchServe",
                (
                    "tsbatch tune --quick",
                    "tsbatch tune --model resnet18 --apply",
                    "tsbatch tune --apply-live .serve",
                ),
                "tsbatch.analysis.tune.cli:main",
            ),
            Command(
                "bench",
                "benchmarks that print figures beside a baseline measured in the same run",
                ("tsbatch bench resnet --shape both", "tsbatch bench intent --settings 2x1 --duration 30"),
                subcommands=(
                    Command(
                        "resnet",
                        "served vs in-process ResNet throughput, per runtime x precision",
                        ("tsbatch bench resnet --shape both --clients 16 --duration 20",),
                        "tsbatch.bench.resnet:main",
                    ),
                    Command(
                        "photos",
                        "real photos per size, reference and reduced JPEG decoding, beside TorchServe's stock handler",
                        (
                            "tsbatch bench photos",
                            "tsbatch bench photos --sizes 1920x1080,4032x3024 --duration 10",
                        ),
                        "tsbatch.bench.photos:main",
                    ),
                    Command(
                        "overload",
                        "the ResNet at 0.5x-2x its capacity, deadline shedding off and on: goodput and p99",
                        (
                            "tsbatch bench overload --p99-ms 300 --seconds 20",
                            "tsbatch bench overload --quick",
                        ),
                        "tsbatch.bench.overload:main",
                    ),
                    Command(
                        "apply",
                        "tsbatch apply under 24 clients of 6000x6000 photos at two workers: failures per run, other model's stall",
                        (
                            "tsbatch bench apply --runs 5",
                            "tsbatch bench apply --apply-from /tmp/main-apply --runs 5",
                        ),
                        "tsbatch.bench.apply_stress:main",
                    ),
                    Command(
                        "trickle-burst",
                        "a trickle broken by bursts, with and without deadlines: does shedding drop what was on time",
                        (
                            "tsbatch bench trickle-burst --models resnet18 bert_intent --budgets 40 50",
                            "tsbatch bench trickle-burst --model-store ../main/model-store",
                        ),
                        "tsbatch.bench.trickle_burst:main",
                    ),
                    Command(
                        "multi-input",
                        "images/s with several images per request vs one, same server",
                        ("tsbatch bench multi-input --per-request 8 --clients 16 --duration 15",),
                        "tsbatch.bench.multi_input:main",
                    ),
                    Command(
                        "intent",
                        "our intent handler vs the usual pad-to-128 handler, same model and settings",
                        ("tsbatch bench intent --settings 2x1 --duration 30",),
                        "tsbatch.bench.intent:main",
                    ),
                    Command(
                        "client",
                        "the load client's CPU per request vs a threaded requests loop",
                        ("tsbatch bench client --concurrency 16 --seconds 3",),
                        "tsbatch.bench.client_overhead:main",
                    ),
                    Command(
                        "clients",
                        "perf_analyzer vs the raw-socket client and Locust: same server, request and load, with their CPU",
                        (
                            "tsbatch bench clients --model bert_intent --concurrency 2 8 --rate 40 --seconds 9",
                        ),
                        "tsbatch.bench.clients:main",
                    ),
                ),
            ),
        ),
    ),
)

COMMANDS: dict[str, Command] = {command.name: command for _, commands in GROUPS for command in commands}

# Renamed after 0.1.0: the per-kind export commands became ``tsbatch export --model M``, and the
# text kind's training and data split moved under ``tsbatch text``. Remove in the next release.
ALIASES: dict[str, Alias] = {
    alias.name: alias
    for alias in (
        Alias("export-image", ("export", "--kind", "image"), "tsbatch export --model <image model>"),
        Alias("export-text", ("export", "--kind", "text"), "tsbatch export --model <text model>"),
        Alias("train-text", ("text", "train"), "tsbatch text train"),
        Alias("split-intents", ("text", "split"), "tsbatch text split"),
    )
}
