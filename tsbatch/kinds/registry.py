"""Every model kind the toolkit builds, serves and loads: adding one is a folder and a line here."""

from __future__ import annotations

from typing import Protocol

from tsbatch.kinds.image.kind import IMAGE
from tsbatch.kinds.kind import Kind
from tsbatch.kinds.text.kind import TEXT

KINDS: dict[str, Kind] = {kind.name: kind for kind in (IMAGE, TEXT)}


class HasKind(Protocol):
    @property
    def kind(self) -> str: ...


def kind_of(spec: HasKind) -> Kind:
    """The kind of a manifest model (its entry was validated against this kind, so it exists)."""
    return KINDS[spec.kind]
