"""`tsbatch`: every job listed with one line, every job's --help with an example, clear errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tsbatch.cli.commands import ALIASES, COMMANDS, Command
from tsbatch.cli.main import main
from tsbatch.paths import REPO_ROOT

# (words after `tsbatch`, command) for every command that runs a job: `serve`, `bench resnet`, ...
LEAVES = [([command.name], command) for command in COMMANDS.values() if not command.subcommands] + [
    ([command.name, sub.name], sub) for command in COMMANDS.values() for sub in command.subcommands
]
MAKEFILE_JOBS = {
    "serve", "stop", "status", "doctor", "archive", "check-config", "loadtest", "tune", "sweep",
    "bench", "plugins", "gpu-check", "export", "text", "package",
}  # fmt: skip


def test_help_lists_every_command_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: tsbatch <command> [options]")
    for command in COMMANDS.values():
        assert f"  {command.name} " in text and command.summary in text, command.name
    assert set(COMMANDS) >= MAKEFILE_JOBS


def test_bench_help_lists_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    text = capsys.readouterr().out
    assert {sub.name for sub in COMMANDS["bench"].subcommands} == {
        "resnet",
        "intent",
        "client",
        "clients",
        "multi-input",
        "overload",
        "photos",
        "apply",
        "trickle-burst",
    }
    for sub in COMMANDS["bench"].subcommands:
        assert f"  {sub.name} " in text and sub.summary in text


@pytest.mark.parametrize(
    "words,command", LEAVES, ids=lambda value: " ".join(value) if isinstance(value, list) else ""
)
def test_each_command_help_names_it_and_shows_an_example(
    words: list[str], command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*words, "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: tsbatch {' '.join(words)} "), text[:200]
    assert "\nexample" in text
    for example in command.examples:
        assert f"\n  {example}" in text


# What a developer's docstring has and a user's help must not: reStructuredText roles and
# literals, and the toolkit's own module names.
DEVELOPER_MARKUP = re.compile(r"``|:(?:func|class|meth|mod|attr):|\b(?:tsbatch|batchkit)[./][a-z_]")


def description_of(help_text: str) -> str:
    """The paragraph argparse prints between the usage lines and the first list of arguments."""
    after_usage = help_text.split("\n\n", 1)[1]
    return after_usage.split("\n\n", 1)[0]


@pytest.mark.parametrize(
    "words,command", LEAVES, ids=lambda value: " ".join(value) if isinstance(value, list) else ""
)
def test_each_command_help_is_written_for_users(
    words: list[str], command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    """One or two plain sentences, then the options and an example: no docstring, no markup."""
    with pytest.raises(SystemExit):
        main([*words, "--help"])
    text = capsys.readouterr().out
    assert not DEVELOPER_MARKUP.search(text), DEVELOPER_MARKUP.search(text)
    description = " ".join(description_of(text).split())
    assert not description.startswith(("usage:", "options:", "positional")), text[:400]
    sentences = re.findall(r"[.!?](?:\s|$)", description)
    assert 1 <= len(sentences) <= 3 and len(description) <= 360, description


def test_a_closed_stdout_ends_quietly() -> None:
    """`tsbatch export --help | head -1`: no BrokenPipeError traceback."""
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {sys.executable} -m tsbatch export --help | head -1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.startswith("usage: tsbatch export"), result.stdout
    assert result.stderr == "", result.stderr
    assert result.returncode in (0, 141)


@pytest.mark.parametrize(
    "words,command", LEAVES, ids=lambda value: " ".join(value) if isinstance(value, list) else ""
)
def test_examples_run_the_command_they_document(words: list[str], command: Command) -> None:
    assert command.examples
    for example in command.examples:
        assert example.split()[: len(words) + 1] == ["tsbatch", *words], example


def test_unknown_command_exits_2_and_suggests_the_close_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["serv"])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "unknown command 'serv' (did you mean 'serve'?)" in error and "tsbatch --help" in error


def test_unknown_bench_target_and_missing_command_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["bench", "gpu"])
    assert stop.value.code == 2 and "unknown command 'gpu'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main([])
    assert stop.value.code == 2 and "name a command" in capsys.readouterr().err


def test_arguments_reach_the_job_and_its_status_comes_back(tmp_path: Path, capsys) -> None:
    """`tsbatch status` is the daemon's status action: nothing runs in an empty folder."""
    assert main(["status", "--run-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().out.strip() == "[serve] not running"
    with pytest.raises(SystemExit) as stop:
        main(["status", "--no-such-option"])
    assert stop.value.code == 2
    assert "usage: tsbatch status" in capsys.readouterr().err


def test_help_is_fast_to_import() -> None:
    """Listing the commands imports none of their modules (no torch, no locust)."""
    probe = (
        "import sys; from tsbatch.cli.main import main; main(['--help']); "
        "heavy = sorted(m for m in ('torch', 'locust', 'tsbatch.archive', 'tsbatch.server') if m in sys.modules); "
        "sys.exit(str(heavy) if heavy else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "usage: tsbatch" in result.stdout


def test_python_dash_m_tsbatch_is_the_same_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tsbatch", "no-such-command"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "unknown command 'no-such-command'" in result.stderr


@pytest.mark.parametrize(
    "old,usage,option",
    [
        ("export-image", "usage: tsbatch export ", "--labels LABELS"),  # the first image model's options
        ("export-text", "usage: tsbatch export ", "--oos-threshold OOS_THRESHOLD"),
        ("train-text", "usage: tsbatch text train ", "--min-oos-recall"),
        ("split-intents", "usage: tsbatch text split ", "--held-out"),
    ],
)
def test_an_old_name_runs_its_new_command_after_a_one_line_notice(
    old: str, usage: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([old, "--help"])
    assert stop.value.code == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(usage) and option in captured.out, captured.out[:300]
    notice = captured.err.strip()
    assert len(notice.splitlines()) == 1 and f"`tsbatch {old}` is deprecated" in notice
    assert f"use `{ALIASES[old].instead}`" in notice and ALIASES[old].instead.split()[1] in COMMANDS
    assert old not in COMMANDS and old not in main_help(capsys)


def main_help(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["--help"]) == 0
    return capsys.readouterr().out


def test_an_old_name_passes_its_arguments_and_status_through(capsys: pytest.CaptureFixture[str]) -> None:
    """`tsbatch split-intents --check` is `tsbatch text split --check`: the committed files are current."""
    assert main(["split-intents", "--check"]) == 0
    assert "deprecated" in capsys.readouterr().err
    assert main(["export-image", "--weights", "/no/such/weights.pth"]) == 1
    assert "weights path /no/such/weights.pth does not exist" in capsys.readouterr().err
