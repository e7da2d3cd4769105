"""The disk cache of made bodies: made once per recipe, read back byte for byte, made again
when its file is not whole, and skipped where it cannot be written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.cache import MAGIC, cache_dir, cached_bodies, read_bodies

BODIES = (b"first", b"", b"\xff\xd8 a JPEG's first bytes" * 1000)


class Maker:
    """Counts its calls: a cache hit makes nothing."""

    def __init__(self, bodies: tuple[bytes, ...] = BODIES) -> None:
        self.bodies = bodies
        self.calls = 0

    def __call__(self) -> list[bytes]:
        self.calls += 1
        return list(self.bodies)


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "tsbatch"


def test_a_recipe_is_made_once_and_read_back_byte_for_byte(private_cache: Path) -> None:
    make = Maker()
    assert cached_bodies("photos", [256, "v1"], make) == BODIES
    assert cached_bodies("photos", [256, "v1"], make) == BODIES
    assert make.calls == 1
    assert cache_dir() == private_cache
    (path,) = private_cache.glob("photos-*.bin")
    assert read_bodies(path) == BODIES


def test_another_recipe_is_another_file(private_cache: Path) -> None:
    make = Maker()
    cached_bodies("photos", [256, "v1"], make)
    other = Maker((b"other",))
    assert cached_bodies("photos", [224, "v1"], other) == (b"other",)
    assert cached_bodies("photos", [256, "v2"], other) == (b"other",)
    assert (make.calls, other.calls) == (1, 2)
    assert len(list(private_cache.glob("photos-*.bin"))) == 3


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # cut short in the last body
        lambda data: data[: len(MAGIC) + 2],  # cut short in the count
        lambda data: data + b"\0",  # bytes past the bodies
        lambda data: b"not a cache" + data[len(MAGIC) :],
    ],
)
def test_a_file_that_is_not_whole_is_made_again(private_cache: Path, damage) -> None:
    cached_bodies("photos", [1], Maker())
    (path,) = private_cache.glob("photos-*.bin")
    path.write_bytes(damage(path.read_bytes()))
    make = Maker()
    assert cached_bodies("photos", [1], make) == BODIES
    assert make.calls == 1
    assert read_bodies(path) == BODIES, "the whole file is written back"


def test_a_cache_that_cannot_be_written_still_gives_the_bodies(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # its tsbatch folder cannot be made
    make = Maker()
    assert cached_bodies("photos", [1], make) == BODIES
    assert cached_bodies("photos", [1], make) == BODIES
    assert make.calls == 2
    assert list(tmp_path.iterdir()) == [blocker], "no temporary file left behind"
