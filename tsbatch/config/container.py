"""Write ``deploy/config.container.properties``: config.properties as the image runs it.

The repository's config.properties binds loopback, which inside a container would make
the server unreachable through published ports. The container file is the same file with
only the addresses (0.0.0.0) and the paths inside the image changed, so batch settings,
limits, token auth and metrics stay exactly what ops edited. Regenerate it after editing
config.properties (a unit test fails while the two disagree):

    python -m deploy.container_config
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tsbatch.config.properties import replace_entry
from tsbatch.paths import DEFAULT_PROPERTIES, REPO_ROOT

TARGET = REPO_ROOT / "deploy" / "config.container.properties"
APP_DIR = "/app"  # where the Dockerfile puts the repository's runtime files

# The only entries that differ from config.properties, and why (written into the header).
CONTAINER_ENTRIES = {
    "inference_address": "http://0.0.0.0:8080",
    "management_address": "http://0.0.0.0:8081",
    "metrics_address": "http://0.0.0.0:8082",
    "model_store": f"{APP_DIR}/model-store",
    "metrics_config": f"{APP_DIR}/metrics.yaml",
}

HEADER = """\
# GENERATED from config.properties by `python -m deploy.container_config`: do not edit.
# Edit config.properties and regenerate; a unit test fails while the two disagree.
#
# Only these entries differ from config.properties:
#   inference/management/metrics_address  0.0.0.0: inside a container loopback is
#       unreachable from outside; what is exposed is decided by the published ports or
#       the Kubernetes Service/NetworkPolicy, and token auth stays on.
#   model_store, metrics_config  paths inside the image (/app); mount a volume over
#       /app/model-store (or pass --model-store) to serve other archives.
# TorchServe writes key_file.json into its working directory (/home/model-server in the
# image); deploy/probe.py reads it for the health checks.

"""


def render(source_text: str) -> str:
    """The container config for a given config.properties text."""
    text = source_text
    for key, value in CONTAINER_ENTRIES.items():
        text = replace_entry(text, key, f"{key}={value}\n")
    return HEADER + text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=Path, default=DEFAULT_PROPERTIES)
    parser.add_argument("--output", type=Path, default=TARGET)
    parser.add_argument("--check", action="store_true", help="exit 1 if the output file is stale")
    args = parser.parse_args(argv)
    expected = render(args.source.read_text())
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != expected:
            print(f"{args.output} is stale: run `python -m deploy.container_config`", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(expected)
    print(f"wrote {args.output}")
    return 0
