"""Write the configs the image runs: config.properties with container addresses and paths.

The repository's config.properties binds loopback, which inside a container would make
the server unreachable through published ports. Two configs are derived from it, each
differing only in the entries listed below, so batch settings, limits and metrics stay
exactly what ops edited:

- ``deploy/config.container.properties`` (the image's default; `docker run`, one host):
  0.0.0.0 addresses and image paths; token auth stays on.
- ``deploy/config.cluster.properties`` (Kubernetes, KServe): the same with TorchServe's
  token auth off, because TorchServe 0.12 makes random keys per process, so a client key
  works on one replica only. Callers are authenticated at the edge instead and a
  NetworkPolicy admits only the edge (docs/production.md, threat model).

Regenerate both after editing config.properties (a unit test fails while they disagree):

    python -m deploy.container_config
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from tsbatch.config.properties import replace_entry
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT

APP_DIR = "/app"  # where the Dockerfile puts the repository's runtime files

# The entries every derived config changes.
CONTAINER_ENTRIES = {
    "inference_address": "http://0.0.0.0:8080",
    "management_address": "http://0.0.0.0:8081",
    "metrics_address": "http://0.0.0.0:8082",
    "model_store": f"{APP_DIR}/model-store",
    "metrics_config": f"{APP_DIR}/metrics.yaml",
    "plugins_path": f"{APP_DIR}/build/plugins",
    "vmargs": f"-Dlog4j.configurationFile={APP_DIR}/log4j2.xml",
}

CONTAINER_NOTE = """\
#   inference/management/metrics_address  0.0.0.0: inside a container loopback is
#       unreachable from outside; what is exposed is decided by the published ports or
#       the Kubernetes Service/NetworkPolicy.
#   model_store, metrics_config, plugins_path, vmargs  paths inside the image (/app); mount a
#       volume over /app/model-store (or pass --model-store) to serve other archives.
"""


@dataclass(frozen=True)
class DerivedConfig:
    """One generated config: where it goes, what it changes, and why (its header)."""

    path: Path
    entries: dict[str, str]
    why: str

    def render(self, source_text: str) -> str:
        """This config for a given config.properties text."""
        text = source_text
        for key, value in self.entries.items():
            text = replace_entry(text, key, f"{key}={value}\n")
        header = (
            "# GENERATED from config.properties by `python -m deploy.container_config`: do not edit.\n"
            "# Edit config.properties and regenerate; a unit test fails while the two disagree.\n"
            "#\n# Only these entries differ from config.properties:\n" + CONTAINER_NOTE + self.why + "\n"
        )
        return header + text


CONTAINER = DerivedConfig(
    path=REPO_ROOT / "deploy" / "config.container.properties",
    entries=CONTAINER_ENTRIES,
    why=(
        "# Token auth stays on: TorchServe writes key_file.json into its working directory\n"
        "# (/home/model-server in the image); deploy/probe.py reads it for the health checks.\n"
    ),
)
CLUSTER = DerivedConfig(
    path=REPO_ROOT / "deploy" / "config.cluster.properties",
    entries={**CONTAINER_ENTRIES, "disable_token_authorization": "true"},
    why=(
        "#   disable_token_authorization=true  TorchServe 0.12 keys are random per process, so\n"
        "#       behind a Service with several replicas a client key works on one pod only.\n"
        "#       Callers authenticate at the ingress/gateway; the NetworkPolicy in\n"
        "#       deploy/kubernetes/torchserve.yaml admits only it (and the load-test pods) to 8080\n"
        "#       and Prometheus to 8082, never 8081. See docs/production.md (threat model).\n"
    ),
)
DERIVED_CONFIGS = (CONTAINER, CLUSTER)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write the container and cluster configs (deploy/config.*.properties) from "
        "config.properties, or with --check fail when they are out of date."
    )
    parser.add_argument("--source", type=Path, default=DEFAULT_PROPERTIES)
    parser.add_argument("--output-dir", type=Path, help="write the configs here instead of deploy/")
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale")
    args = parser.parse_args(argv)
    source = args.source.read_text()
    stale = 0
    for derived in DERIVED_CONFIGS:
        output = args.output_dir / derived.path.name if args.output_dir else derived.path
        expected = derived.render(source)
        if not args.check:
            output.write_text(expected)
            print(f"wrote {output}")
        elif not output.exists() or output.read_text() != expected:
            print(f"{output} is stale: run `python -m deploy.container_config`", file=sys.stderr)
            stale = 1
    return stale
