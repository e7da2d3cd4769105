"""``tsbatch export --model M``: export and verify one model of models.yaml, whatever its kind.

The model's ``kind:`` decides the rest of the command line: each kind adds its own options
(``Kind.export_options``: your weights, your data) and its exporter runs with them
(``export_with_options(spec, args)``). An option that only another kind takes is refused with the
kind that takes it, and ``--help`` without a model lists every kind's options.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from tsbatch.archive.kind import Kind, installed_kinds
from tsbatch.archive.manifest import Manifest, ManifestError, ModelSpec, load_manifest
from tsbatch.paths import DEFAULT_MANIFEST

DESCRIPTION = (
    "Export one model of models.yaml to TorchScript (and the compiled packages its entry asks for), "
    "check it against the eager model and write the files its archive needs into build/<model>/. "
    "The options after --model depend on the model's kind."
)
HELP_FLAGS = ("-h", "--help")


def common_parser(add_help: bool = True, epilog: str | None = None) -> argparse.ArgumentParser:
    """The options every kind takes; ``--kind`` serves the deprecated per-kind command names."""
    parser = argparse.ArgumentParser(
        description=textwrap.fill(DESCRIPTION, 100),
        add_help=add_help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--model", help="the models.yaml entry to export")
    parser.add_argument("--kind", help=argparse.SUPPRESS)  # no --model: the first model of this kind
    return parser


def kind_options(kind: Kind, title: str) -> argparse.ArgumentParser:
    """A parser holding only ``kind``'s own options, under ``title``."""
    parser = argparse.ArgumentParser(add_help=False, usage=argparse.SUPPRESS)
    kind.export_options(parser.add_argument_group(title))
    return parser


def every_kind_help(manifest: Manifest | None) -> str:
    """Each installed kind's options, with the manifest's models of that kind where it loaded."""
    sections = []
    for kind in installed_kinds().values():
        models = [] if manifest is None else [n for n, spec in manifest.models.items() if spec.kind is kind]
        title = f"options of kind {kind.name}" + (f" ({', '.join(models)})" if models else "")
        sections.append(kind_options(kind, title).format_help().strip("\n"))
    return "\n\n".join(sections)


def model_parser(kind: Kind) -> argparse.ArgumentParser:
    """The common options and those of the model's kind: what ``tsbatch export --model M`` parses."""
    parser = common_parser()
    kind.export_options(parser.add_argument_group(f"options of kind {kind.name}"))
    return parser


def kind_taking(option: str, kinds: Sequence[Kind]) -> Kind | None:
    """The first of ``kinds`` with ``option`` (``--labels`` or ``--labels=x``) among its own."""
    name = option.split("=", 1)[0]
    for kind in kinds:
        parser = kind_options(kind, kind.name)
        if name in parser._option_string_actions:  # argparse's own index of option strings
            return kind
    return None


def refuse_unknown(parser: argparse.ArgumentParser, unknown: list[str], model: str, kind: Kind) -> None:
    """argparse's error for options no kind takes; for another kind's option, which kind takes it."""
    others = [other for other in installed_kinds().values() if other is not kind]
    for option in unknown:
        owner = kind_taking(option, others) if option.startswith("-") else None
        if owner is not None:
            parser.error(
                f"{option.split('=', 1)[0]} is an option of kind {owner.name}, and {model} is kind {kind.name} "
                f"(`tsbatch export --model {model} --help` lists its options)"
            )
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")


def chosen_model(manifest: Manifest, model: str | None, kind: str | None) -> ModelSpec:
    """``--model``, else the first model of ``--kind``; a ManifestError listing the models when neither."""
    if model:
        return manifest.model(model)
    if kind:
        kinds = installed_kinds()
        if kind not in kinds:
            raise ManifestError(f"no kind {kind!r} is installed ({', '.join(kinds)})")
        return manifest.model(manifest.first_of_kind(kind))
    listed = ", ".join(f"{name} (kind {spec.kind.name})" for name, spec in manifest.models.items())
    raise ManifestError(f"name the model to export with --model: one of {listed}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first, _ = common_parser(add_help=False).parse_known_args(argv)
    manifest = None
    try:
        manifest = load_manifest(first.manifest)
        spec = chosen_model(manifest, first.model, first.kind)
    except (ManifestError, OSError) as exc:  # OSError: no models.yaml where it was looked for
        if any(arg in HELP_FLAGS for arg in argv):
            common_parser(epilog=every_kind_help(manifest)).parse_args(["--help"])
        problem = f"cannot read {first.manifest}: {exc.strerror}" if isinstance(exc, OSError) else str(exc)
        common_parser().error(problem)
    parser = model_parser(spec.kind)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        refuse_unknown(parser, unknown, spec.name, spec.kind)
    # The kind's exporter imports its libraries only now: the other kinds never need them.
    return spec.kind.exporter().export_with_options(spec, args)
