"""``tsbatch loadtest``: Locust on the toolkit's packaged locustfile, gated on the SLA file.

Every option this wrapper does not know goes to Locust unchanged and in order, so Locust's
own options and the toolkit plugin's (``--sla-profile``, ``--mix``, ``--warmup``, ...) work
as they do with ``locust -f loadtest/locustfile.py``, including options added later.
Headless unless ``--ui``; the UI binds 127.0.0.1 unless ``--web-host`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locust" / "locustfile.py"


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument(
        "--ui", action="store_true", help="Locust's web UI with the SLA gate tab, not headless"
    )
    parser.add_argument(
        "--locust-help", action="store_true", help="list Locust's options and the plugin's, then exit"
    )
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
