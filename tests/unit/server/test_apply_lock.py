"""One apply at a time per server: the second is refused saying who holds the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tsbatch.server.apply_lock import LOCK_NAME, ApplyLocked, apply_lock

HOLD = "import sys, time; from pathlib import Path; from tsbatch.server.apply_lock import apply_lock\n" \
    "with apply_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)\n"  # fmt: skip


def test_a_second_apply_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(ApplyLocked, match=f"pid {holder.pid} "), apply_lock(tmp_path, wait_s=0.3):
            pass
    finally:
        holder.kill()
        holder.wait()
    # The holder died without finishing: the lock is free, and the next holder hears of it.
    with apply_lock(tmp_path) as previous:
        assert previous["pid"] == holder.pid and previous["finished"] is False
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    with apply_lock(tmp_path) as previous:
        assert previous == {}, "a finished apply leaves nothing to report"
