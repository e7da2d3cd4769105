"""Bytes that take seconds to make and never change for the same recipe (the build gate's
camera-size photos), kept on disk between processes: every image build and every test process
would otherwise make them again. The file is named by a digest of the recipe, which names all
the bytes depend on (parameters, library versions, the source files that make them); a file that
cannot be read back whole is made again, and a cache that cannot be written is skipped."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tsbatch.environment import Environment

MAGIC = b"TSBATCH-BODIES-1\n"
COUNT = struct.Struct("<I")
LENGTH = struct.Struct("<Q")


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tsbatch``, else ``~/.cache/tsbatch`` (where Linux tools keep what they can remake)."""
    return Environment.read().cache_dir


def cached_bodies(
    name: str, recipe: Sequence[object], make: Callable[[], Sequence[bytes]]
) -> tuple[bytes, ...]:
    """``make()``'s bodies, read from ``cache_dir()`` when this recipe's file is there and whole."""
    key = hashlib.sha256(json.dumps(list(recipe), default=str).encode()).hexdigest()[:20]
    path = cache_dir() / f"{name}-{key}.bin"
    with contextlib.suppress(OSError, ValueError):
        return read_bodies(path)
    bodies = tuple(make())
    with contextlib.suppress(OSError):
        write_bodies(path, bodies)
    return bodies


def write_bodies(path: Path, bodies: Sequence[bytes]) -> None:
    """Written beside ``path`` and renamed onto it: a reader never sees half a file, and two
    processes making the same bodies at once both leave a whole one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(MAGIC + COUNT.pack(len(bodies)))
            out.write(b"".join(LENGTH.pack(len(body)) for body in bodies))
            for body in bodies:
                out.write(body)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_bodies(path: Path) -> tuple[bytes, ...]:
    """The bodies ``write_bodies`` wrote; ValueError for a file that is not one of them, whole."""
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ValueError(f"{path} is no cache of bodies")
    offset = len(MAGIC)
    try:
        (count,) = COUNT.unpack_from(data, offset)
        offset += COUNT.size
        lengths = [LENGTH.unpack_from(data, offset + index * LENGTH.size)[0] for index in range(count)]
    except struct.error as exc:
        raise ValueError(f"{path} is cut short") from exc
    offset += count * LENGTH.size
    if offset + sum(lengths) != len(data):
        raise ValueError(f"{path} is cut short or has bytes past its bodies")
    bodies = []
    for length in lengths:
        bodies.append(data[offset : offset + length])
        offset += length
    return tuple(bodies)
