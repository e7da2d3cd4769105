"""A worker's decode threads: a fixed pool, or ``auto``, sized per batch by what it holds.

PIL and torchvision release the GIL while they decode and resample, so threads decode a
batch's images side by side. A worker is decode-bound only on big pictures: a 224x224 JPEG
decodes in under a millisecond, less than the model takes per image, and the other cores
are better left to the frontend and to more workers; a 12 MP photo takes several ms even
reduced, and then a pool lets one worker (one copy of the model) use every core. ``auto``
reads each image's size from its header (about 20 microseconds), prices its decode in
pixels (:func:`pixel_cost`: those it decodes to, and for a reduced JPEG a share of those
it skips) and asks :func:`batch_threads`: inline for small pictures, side by side on up to
the cores this worker process may use for big ones.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from PIL import Image

from batchkit.batching import decode_each
from batchkit.errors import RequestError
from image_serving.reduced import dct_scale, scaled_size

AUTO = "auto"
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
# A batch whose pictures cost this many pixels each on average decodes side by side:
# 512x512, between 224x224 (50k, inline) and 640x480 (307k); 1920x1080, 12 MP and 48 MP
# photos, reduced or not, are all above it.
LARGE_PICTURE_PIXELS = 512 * 512
# A reduced JPEG decode still entropy-decodes every block: measured with PIL on a 12 MP
# photo, 14 ms at 1/8 against 57 ms in full, so each pixel it skips costs about a quarter.
SKIPPED_PIXEL_SHARE = 4

Item = TypeVar("Item")
Result = TypeVar("Result")


def decode_threads_problem(setting: object) -> str | None:
    """Why a ``decode_threads`` setting is wrong (``auto`` or a whole number >= 1), or None."""
    if setting == AUTO:
        return None
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        return f"must be {AUTO} or a whole number of at least 1, got {setting!r}"
    return None


def worker_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The cores this process may run on: its CPU affinity (a launcher may pin workers),
    and no more than a container's CPU quota (cgroup v2 ``cpu.max``, e.g. ``200000 100000``)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        cores = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2 here, or no quota
        pass
    return max(1, cores)


def batch_threads(pixels: Sequence[int], cores: int) -> int:
    """Threads that decode a batch whose images cost ``pixels`` each (:func:`pixel_cost`),
    on a worker that may use ``cores``: one (inline, no pool) for one image, one core or small pictures;
    else one per image, up to the cores."""
    if len(pixels) < 2 or cores < 2:
        return 1
    if sum(pixels) < LARGE_PICTURE_PIXELS * len(pixels):
        return 1
    return min(cores, len(pixels))


def pixel_cost(raw: bytes, max_pixels: int, reduce_for: int = 0) -> int:
    """What decoding ``raw`` costs, in pixels decoded in full, from its header alone: its
    pixels, or for a JPEG reduced for ``reduce_for`` (a resize size) at the DCT scale reduced
    decoding picks, those it decodes to and a share of those it skips; 0 for what is not an
    image or is refused as over ``max_pixels`` (its error is its own, and costs nothing)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw)) as header:
                width, height, fmt = header.width, header.height, header.format
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError):
        return 0
    scale = dct_scale(width, height, reduce_for, max_pixels) if reduce_for and fmt == "JPEG" else 1
    if scale is None:
        return 0
    decoded_width, decoded_height = scaled_size(width, height, scale)
    pixels = decoded_width * decoded_height
    if pixels > max_pixels:
        return 0
    return pixels + (width * height - pixels) // SKIPPED_PIXEL_SHARE


class DecodePool:
    """Runs one function over a batch's items on ``threads`` threads (or, ``auto``, as many
    as :meth:`threads_for` says for the batch, up to ``cores``): results in the items'
    order, each item's error its own. One thread runs inline, with no pool."""

    def __init__(self, threads: int | str, cores: int | None = None) -> None:
        problem = decode_threads_problem(threads)
        if problem:
            raise ValueError(f"decode threads {problem}")
        self.threads = threads  # the setting: a fixed size, or auto
        self.limit = worker_cores() if cores is None else cores
        if isinstance(threads, int):
            self.limit = threads
        self._executor = (
            ThreadPoolExecutor(self.limit, thread_name_prefix="decode") if self.limit > 1 else None
        )

    @property
    def auto(self) -> bool:
        return self.threads == AUTO

    def threads_for(self, pixels: Sequence[int]) -> int:
        """The threads a batch of images decoding to ``pixels`` each gets."""
        return batch_threads(pixels, self.limit) if self.auto else self.limit

    def map(
        self,
        function: Callable[[Item], Result],
        items: Sequence[Item | RequestError],
        threads: int | None = None,
    ) -> list[Result | RequestError]:
        """``function`` over ``items`` on ``threads`` threads (default: the pool's size); an
        item already an error stays one."""
        count = min(self.limit if threads is None else threads, self.limit, len(items))
        if self._executor is None or count < 2:
            return decode_each(items, function)
        results: list[Result | RequestError] = [None] * len(items)  # type: ignore[list-item]
        waiting = deque(range(len(items)))

        def run() -> None:  # each thread takes the next item until none is left
            while True:
                try:
                    index = waiting.popleft()
                except IndexError:
                    return
                results[index] = decode_each([items[index]], function)[0]

        for future in [self._executor.submit(run) for _ in range(count)]:
            future.result()
        return results
