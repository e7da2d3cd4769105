"""Which model of ``models.yaml`` a benchmark or the GPU check measures: ``--model``, else the
manifest's first model of the kind it measures. A bench measures a kind of model (its
payloads and handler), so it takes the user's model of that kind as readily as ours."""

from __future__ import annotations

import argparse
import sys

from tsbatch.archive.manifest import Manifest, ManifestError, load_manifest


def add_model_option(parser: argparse.ArgumentParser, kind: str) -> None:
    parser.add_argument(
        "--model",
        help=f"the models.yaml model to measure, of kind {kind} (default: the first of that kind)",
    )


def chosen_model(requested: str | None, kind: str, manifest: Manifest) -> str:
    """``requested`` when it names a model of ``kind``, else the first such model; a
    :class:`ManifestError` saying what models.yaml offers otherwise."""
    of_kind = [name for name, spec in manifest.models.items() if spec.kind == kind]
    if requested is None:
        if not of_kind:
            raise ManifestError(f"models.yaml has no model of kind {kind!r} to measure: add one")
        return of_kind[0]
    if requested not in manifest.models:
        raise ManifestError(f"--model {requested!r} is not in models.yaml ({', '.join(manifest.models)})")
    if requested not in of_kind:
        actual = manifest.models[requested].kind
        offered = ", ".join(of_kind) or "none"
        raise ManifestError(
            f"--model {requested!r} is of kind {actual!r}; this measures kind {kind!r} (models.yaml has: {offered})"
        )
    return requested


def main(argv: list[str] | None = None) -> int:
    """Print the model a bench of ``kind`` measures (scripts/gpu_check.sh asks this way)."""
    parser = argparse.ArgumentParser(description="print the models.yaml model a bench of KIND measures")
    parser.add_argument("kind")
    add_model_option(parser, "KIND")
    args = parser.parse_args(argv)
    try:
        print(chosen_model(args.model, args.kind, load_manifest()))
    except ManifestError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
