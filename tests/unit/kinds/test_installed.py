"""Every installed kind is complete: each field of its worker config is set by someone, its
heavy modules exist, and the manifest's models find theirs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from batchkit.protocols import v2_metadata
from image_serving.images import IMAGE_INPUTS
from tsbatch.archive.kind import BUILD_FIELDS, Kind, installed_kinds
from tsbatch.archive.manifest import load_manifest
from tsbatch.kinds.image.kind import IMAGE
from tsbatch.kinds.text.kind import TEXT

KINDS = installed_kinds()
ALL = pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))


def test_the_package_registers_its_two_kinds() -> None:
    assert KINDS == {"image": IMAGE, "text": TEXT}


@ALL
def test_every_worker_field_comes_from_the_manifest_the_export_or_the_build(kind: Kind) -> None:
    """A field renamed on one side, or added to the worker's config and set by nobody, fails here."""
    fields = {field.name for field in dataclasses.fields(kind.config)}
    sources = [kind.entry.handler_keys, kind.resolved, BUILD_FIELDS]
    assert set().union(*sources) == fields, set().union(*sources) ^ fields
    assert sum(len(source) for source in sources) == len(fields), "a field has two sources"


@ALL
def test_the_build_and_the_sweep_are_the_kind_s_own_callables(kind: Kind) -> None:
    assert {kind.exporter.__module__, kind.swept_models.__module__} == {f"tsbatch.kinds.{kind.name}.kind"}
    assert kind.exporter().__name__ == f"tsbatch.kinds.{kind.name}.export"
    assert kind.swept_models().__name__ == f"tsbatch.kinds.{kind.name}.sweep"


def test_loading_the_kinds_leaves_their_heavy_libraries_unimported() -> None:
    """What the load generators pay for a kind: its record, not torchvision or transformers."""
    code = (
        "import sys; from tsbatch.archive.kind import installed_kinds; installed_kinds(); "
        "print(sorted(set(sys.modules) & {'torchvision', 'transformers', 'sklearn'}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_the_manifest_s_models_find_their_kind() -> None:
    manifest = load_manifest()
    assert {spec.kind.name for spec in manifest.models.values()} == set(KINDS)
    assert manifest.model("resnet18").kind is KINDS["image"]


def test_the_metadata_an_archive_carries_names_each_kind_s_input() -> None:
    assert KINDS["image"].input_schema() is IMAGE_INPUTS
    text = v2_metadata(KINDS["text"].input_schema())
    assert json.loads(json.dumps(text)) == {
        "platform": "pytorch",
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1, 1]}],
        "outputs": [{"name": "predictions", "datatype": "BYTES", "shape": [-1]}],
    }
