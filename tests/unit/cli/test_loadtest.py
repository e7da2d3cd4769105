"""`tsbatch loadtest`: Locust on the packaged locustfile, every option it does not know passed on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tsbatch.cli.loadtest import LOCUSTFILE, locust_command, parser
from tsbatch.paths import REPO_ROOT

LOCUST = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]


def test_headless_on_the_packaged_locustfile_with_options_passed_in_order() -> None:
    # plugin options that do not exist yet must pass too: nothing is filtered
    args = [
        "-u",
        "8",
        "-t",
        "30s",
        "--sla-profile",
        "cpu",
        "--requests",
        "100",
        "--p99-ms=250",
        "TorchServeUser",
    ]
    assert locust_command(args) == [*LOCUST, "--headless", *args]
    assert LOCUSTFILE.is_file() and LOCUSTFILE.is_relative_to(REPO_ROOT / "tsbatch")


def test_ui_binds_loopback_unless_told_otherwise() -> None:
    assert locust_command(["--ui", "--web-port", "8089"]) == [
        *LOCUST, "--web-host", "127.0.0.1", "--web-port", "8089"
    ]  # fmt: skip
    assert locust_command(["--ui", "--web-host=0.0.0.0"]) == [*LOCUST, "--web-host=0.0.0.0"]


def test_locust_help_asks_locust() -> None:
    assert locust_command(["--locust-help", "-u", "3"]) == [*LOCUST, "--help"]


def test_help_lists_the_plugin_options_locust_would_take(capsys: pytest.CaptureFixture[str]) -> None:
    """Locust's own --help answers before loading the locustfile, so it cannot list them."""
    with pytest.raises(SystemExit):
        parser().parse_known_args(["--help"])
    text = capsys.readouterr().out
    for option in ("--sla-profile", "--mix", "--warmup", "--sla-report", "--shape"):
        assert f"  {option} " in text, option


def listed_classes(locustfile: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "locust", "-f", locustfile, "--list"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return sorted(line.strip() for line in result.stdout.splitlines()[1:] if line.strip())


def test_the_repository_locustfile_is_the_packaged_one() -> None:
    """`locust -f loadtest/locustfile.py` keeps working, with the same user classes."""
    packaged = listed_classes(str(LOCUSTFILE))
    assert packaged == ["MultiInputUser", "TorchServeUser"]
    assert listed_classes("loadtest/locustfile.py") == packaged
