"""Which workers of a version are computing, read from the frontend's log lines."""

from __future__ import annotations

from pathlib import Path

from tsbatch.server.worker_batches import ANSWERED, SENT, BatchLog, busy_workers


def line(worker: str, version: str, event: str, model: str = "resnet18") -> str:
    return (f"2026-12-05T09:17:26,639 [INFO ] W-{worker}-{model}_{version} "
            f"org.pytorch.serve.wlm.WorkerThread - {event}: 12\n")  # fmt: skip


def test_a_worker_is_computing_between_sending_and_answering() -> None:
    text = line("9000", "1.0", SENT) + line("9001", "1.0", SENT) + line("9000", "1.0", ANSWERED)
    assert busy_workers(text, "resnet18", "1.0") == {"9000": False, "9001": True}


def test_other_versions_models_and_lines_are_ignored() -> None:
    text = (
        line("9000", "1.0.b4d10w1", SENT)
        + line("9001", "1.0", SENT, model="bert_intent")
        + "2026-12-05T09:17:26,639 [INFO ] W-9002-resnet18_1.0-stdout MODEL_LOG - Looping backend response at\n"
    )
    assert busy_workers(text, "resnet18", "1.0") == {}


def test_the_log_is_followed_and_history_gives_the_state_before(tmp_path: Path) -> None:
    path = tmp_path / "ts_log.log"
    path.write_text(line("9000", "1.0", SENT) + line("9001", "1.0", ANSWERED))
    log = BatchLog.following(path, "resnet18", "1.0")
    assert log.computing(["9000", "9001"]) == ["9000"]
    with path.open("a") as handle:
        handle.write(line("9000", "1.0", ANSWERED) + line("9001", "1.0", SENT).rstrip("\n"))  # half a line
    assert log.computing(["9000", "9001"]) == [], "a half-written line is read once whole"
    with path.open("a") as handle:
        handle.write("\n")
    assert log.computing(["9000", "9001"]) == ["9001"]


def test_a_worker_the_log_never_showed_counts_as_computing(tmp_path: Path) -> None:
    path = tmp_path / "ts_log.log"
    path.write_text(line("9000", "1.0", ANSWERED))
    log = BatchLog.following(path, "resnet18", "1.0")
    assert log.computing(["9000", "9005"]) == ["9005"] and log.unseen(["9000", "9005"]) == ["9005"]


def test_a_rotated_log_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "ts_log.log"
    path.write_text(line("9000", "1.0", SENT) * 20)
    log = BatchLog.following(path, "resnet18", "1.0")
    path.write_text(line("9000", "1.0", ANSWERED))
    assert log.computing(["9000"]) == []


def test_history_goes_further_back_until_each_worker_is_seen(tmp_path: Path) -> None:
    from tsbatch.server.worker_batches import HISTORY_BYTES

    path = tmp_path / "ts_log.log"
    filler = line("9000", "1.0", SENT, model="bert_intent") * (HISTORY_BYTES // 100)
    path.write_text(line("9001", "1.0", SENT) + filler + line("9000", "1.0", ANSWERED))
    assert BatchLog.following(path, "resnet18", "1.0").unseen(["9000", "9001"]) == ["9001"]
    log = BatchLog.following(path, "resnet18", "1.0", ["9000", "9001"])
    assert log.computing(["9000", "9001"]) == ["9001"] and log.unseen(["9000", "9001"]) == []
