"""``tsbatch loadtest``: Locust on the toolkit's packaged locustfile, gated on the SLA file.

Every option this wrapper does not know goes to Locust unchanged and in order, so Locust's
own options and the toolkit plugin's (``--sla-profile``, ``--mix``, ``--warmup``, ...) work
as they do with ``locust -f loadtest/locustfile.py``, including options added later.
Headless unless ``--ui``; the UI binds 127.0.0.1 unless ``--web-host`` says otherwise.
``--help`` lists the plugin's options (Locust's own ``--help`` cannot: it answers before
loading the locustfile that registers them); ``--locust-help`` lists Locust's.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locust" / "locustfile.py"


ARGPARSE_KEYWORDS = {
    "action",
    "nargs",
    "const",
    "default",
    "type",
    "choices",
    "required",
    "help",
    "metavar",
    "dest",
}


class PluginListing:
    """Takes the plugin's ``add_argument`` calls, written for Locust's parser (which has extra
    keywords such as ``include_in_web_ui``), into a plain argparse group, to list them."""

    def __init__(self, group: argparse._ArgumentGroup) -> None:
        self.group = group

    def add_argument(self, *names: str, **keywords: Any) -> None:
        self.group.add_argument(*names, **{k: v for k, v in keywords.items() if k in ARGPARSE_KEYWORDS})


def plugin_options_help() -> str:
    """The toolkit plugin's options as Locust will take them, from the one place that declares them."""
    from tsbatch.locust.options import add_options

    listing = argparse.ArgumentParser(usage=argparse.SUPPRESS, add_help=False)
    add_options(
        PluginListing(listing.add_argument_group("the toolkit's Locust options (passed on like any other)"))
    )
    return listing.format_help().strip()


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Run Locust on the toolkit's locustfile against a running TorchServe and gate the "
        "result on the SLA file; headless unless --ui. Options not listed here go to Locust as they are "
        "(--locust-help lists them).",
        epilog=plugin_options_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "--ui", action="store_true", help="Locust's web UI with the SLA gate tab, not headless"
    )
    parser.add_argument("--locust-help", action="store_true", help="list Locust's own options, then exit")
    return parser


def locust_command(args: list[str]) -> list[str]:
    """The Locust command line for ``tsbatch loadtest <args>``."""
    options, passed = parser().parse_known_args(args)
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    if options.locust_help:
        return [*command, "--help"]
    if not options.ui:
        command.append("--headless")
    elif not any(arg == "--web-host" or arg.startswith("--web-host=") for arg in passed):
        command += ["--web-host", "127.0.0.1"]
    return [*command, *passed]


def main(argv: list[str] | None = None) -> int:
    """Replace this process with Locust: its exit status (the SLA verdict) and signals are the run's."""
    command = locust_command(list(sys.argv[1:] if argv is None else argv))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
