"""``tsbatch <command> [options]``: the toolkit's one command (``tsbatch --help`` lists the jobs).

Only the command name is parsed here; its arguments go untouched to the ``main(argv)`` that
does the work, so each job keeps one parser and one ``--help``. That help is printed as
``tsbatch <command>`` with the command's examples after it.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from tsbatch.cli.commands import ALIASES, COMMANDS, GROUPS, Command

PROGRAM = "tsbatch"
HELP_FLAGS = ("-h", "--help")
SUMMARY = "TorchServe handlers, archives, load tests and batch tuning for latency SLAs."


def examples_text(examples: Sequence[str]) -> str:
    return "\n".join(["example:" if len(examples) == 1 else "examples:", *(f"  {e}" for e in examples)])


def listing_parser(
    prog: str, description: str, groups: Sequence[tuple[str, Sequence[Command]]], examples: Sequence[str]
) -> argparse.ArgumentParser:
    """A parser whose help lists ``groups`` of commands, one line each, then the examples."""
    width = max(len(command.name) for _, commands in groups for command in commands) + 2
    sections = [
        "\n".join([f"{title}:", *(f"  {c.name:<{width}}{c.summary}" for c in commands)])
        for title, commands in groups
    ]
    closing = f"`{prog} <command> --help` shows the options of a command and an example."
    return argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} <command> [options]",
        description=description,
        epilog="\n\n".join([*sections, examples_text(examples), closing]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def top_parser() -> argparse.ArgumentParser:
    return listing_parser(
        PROGRAM, SUMMARY, GROUPS, ("tsbatch serve", "tsbatch loadtest -t 30s", "tsbatch stop")
    )


@contextmanager
def program_name(prog: str) -> Iterator[None]:
    """argparse names a program after ``sys.argv[0]``: the job's parser then says ``tsbatch <command>``."""
    saved = sys.argv[0] if sys.argv else ""
    if sys.argv:
        sys.argv[0] = prog
    else:
        sys.argv.append(prog)
    try:
        yield
    finally:
        sys.argv[0] = saved


def run(command: Command, args: list[str], prog: str) -> int:
    """Import the command's module now (torch and friends load only for the job that needs them)."""
    module_name, _, function_name = command.runs.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    keywords = {"action": command.action} if command.action else {}
    with program_name(prog):
        try:
            return int(function(args, **keywords) or 0)
        except SystemExit as stop:
            if stop.code in (0, None) and any(arg in HELP_FLAGS for arg in args):
                print(f"\n{examples_text(command.examples)}")
            raise


def dispatch(parser: argparse.ArgumentParser, commands: Sequence[Command], args: list[str], prog: str) -> int:
    by_name = {command.name: command for command in commands}
    if not args:
        parser.print_help(sys.stderr)
        parser.exit(2, f"\n{prog}: error: name a command\n")
    if args[0] in HELP_FLAGS:
        parser.print_help()
        return 0
    name, rest = args[0], args[1:]
    command = by_name.get(name)
    if command is None:
        close = difflib.get_close_matches(name, list(by_name), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        parser.error(f"unknown command {name!r}{hint}; `{prog} --help` lists them")
    sub_prog = f"{prog} {name}"
    if command.subcommands:
        listing = listing_parser(
            sub_prog, command.summary, [("commands", command.subcommands)], command.examples
        )
        return dispatch(listing, command.subcommands, rest, sub_prog)
    return run(command, rest, sub_prog)


# What a shell reports for a program whose reader closed the pipe (128 + SIGPIPE).
CLOSED_PIPE_STATUS = 141


def resolve_alias(args: list[str]) -> list[str]:
    """An old command name's arguments as its new command's, after a one-line notice on stderr."""
    alias = ALIASES.get(args[0]) if args else None
    if alias is None:
        return args
    print(
        f"{PROGRAM}: `{PROGRAM} {alias.name}` is deprecated and goes in the next release: use `{alias.instead}`",
        file=sys.stderr,
    )
    return [*alias.words, *args[1:]]


def main(argv: list[str] | None = None) -> int:
    args = resolve_alias(list(sys.argv[1:] if argv is None else argv))
    try:
        try:
            return dispatch(top_parser(), list(COMMANDS.values()), args, PROGRAM)
        finally:
            sys.stdout.flush()  # here, not at exit, where a closed pipe could no longer be caught
    except BrokenPipeError:
        # The reader went away (`tsbatch ... --help | head -1`): end quietly, as shell tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE_STATUS
