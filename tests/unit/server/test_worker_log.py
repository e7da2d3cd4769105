"""Reading why a worker died while loading out of TorchServe's model log."""

from __future__ import annotations

from pathlib import Path

from tsbatch.server.worker_log import LogFollower, worker_failures

PREFIX = "2026-12-04T00:47:19,097 [INFO ] W-{port}-{model}_1.0-stdout MODEL_LOG - "
# What TorchServe 0.12 logged for a handler importing a missing package (two workers, their
# lines interleaved; trimmed), then what the frontend's restart of one of them logged.
WORKER_LINES = [
    (31200, "model_name: broken_model, batchSize: 1"),
    (31200, "Backend worker process died."),
    (31200, "Traceback (most recent call last):"),
    (31201, "Backend worker process died."),
    (31200, '  File "/venv/lib/python3.11/site-packages/ts/model_loader.py", line 108, in load'),
    (31200, "    module, function_name = self._load_handler_file(handler)"),
    (31200, "                            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"),
    (31201, "Traceback (most recent call last):"),
    (31200, '  File "/tmp/models/509f/broken_handler.py", line 2, in <module>'),
    (31200, "    import package_the_server_lacks"),
    (31200, "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"),
    (31200, "ModuleNotFoundError: No module named 'package_the_server_lacks'"),
    (31200, ""),
    (31200, "During handling of the above exception, another exception occurred:"),
    (31200, "ModuleNotFoundError: No module named 'ts.torch_handler.broken_handler'"),
    (31200, "model_name: broken_model, batchSize: 1"),
]


def log_text(lines: list[tuple[int, str]], model: str = "broken_model") -> str:
    return "".join(PREFIX.format(port=port, model=model) + text + "\n" for port, text in lines)


def test_each_death_is_read_with_its_own_workers_lines_and_first_exception() -> None:
    first, second = worker_failures(log_text(WORKER_LINES))
    assert first.model == second.model == "broken_model"  # the underscore is the model's, not the version's
    assert (
        first.complete
        and first.exception == "ModuleNotFoundError: No module named 'package_the_server_lacks'"
    )
    assert first.describe().splitlines() == [
        "a worker of broken_model died while loading: "
        "ModuleNotFoundError: No module named 'package_the_server_lacks'",
        '  File "/tmp/models/509f/broken_handler.py", line 2, in <module>',
        "    import package_the_server_lacks",
        "  then: ModuleNotFoundError: No module named 'ts.torch_handler.broken_handler'",
    ]
    assert not second.complete, "the second worker has not written its exception line yet"


def test_a_healthy_log_and_other_lines_are_no_failure() -> None:
    healthy = log_text([(9000, "Torch worker started."), (9000, "Python runtime: 3.11.7")])
    assert (
        worker_failures(
            healthy + "2026-12-04 [INFO ] main org.pytorch.serve.ModelServer - Backend worker process died.\n"
        )
        == []
    )


def test_runtime_and_memory_errors_at_load_are_deaths_too() -> None:
    lines = [(9000, "Failed to load model m, exception boom"), (9000, "RuntimeError: boom")]
    (failure,) = worker_failures(log_text(lines, model="m"))
    assert failure.exception == "RuntimeError: boom"


def test_the_follower_reads_whole_lines_from_its_offset(tmp_path: Path) -> None:
    log = tmp_path / "model_log.log"
    follower = LogFollower(log, LogFollower.end_of(log))
    assert follower.read() == "", "no file yet"
    log.write_text("old line\n")
    follower = LogFollower(log, LogFollower.end_of(log))  # a restarted server: only what follows counts
    with log.open("a") as out:
        out.write("new line\nhalf a li")
    assert follower.read() == "new line\n"
    with log.open("a") as out:
        out.write("ne\n")
    assert follower.read() == "new line\nhalf a line\n"
