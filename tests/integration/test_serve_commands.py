"""`make serve`'s closing summary, as a user reads it: what each worker serves (from the
workers' own decision) and example calls that answer when pasted.

The server is started as `make serve` starts it (``tsbatch.cli.daemon.start``), from a
copy of config.properties on private loopback ports; the printed commands run as printed,
in a folder that has the repository's ``.venv``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.support import json_documents, private_port_entries
from tsbatch.archive.manifest import Manifest, load_manifest
from tsbatch.archive.package import private_store
from tsbatch.cli.daemon import start as serve_start
from tsbatch.cli.daemon import stop as serve_stop
from tsbatch.config.properties import replace_entry
from tsbatch.paths import REPO_ROOT

pytestmark = pytest.mark.slow

MODELS = ["resnet18", "bert_intent"]


def printed_commands(output: str) -> list[str]:
    """The indented lines between "Try, from ..." and the management API note."""
    lines = output[output.index("Try, from") :].splitlines()[1:]
    return [line.strip() for line in lines if line.startswith("  ") and not line.strip().startswith("(")]


def test_make_serve_says_what_it_serves_and_its_calls_work(tmp_path: Path, model_store: Path, capsys) -> None:
    properties, store = private_store(tmp_path / "serve", MODELS)
    text = properties.read_text()
    for key, value in private_port_entries().items():
        text = replace_entry(text, key, f"{key}={value}\n")
    properties.write_text(text)
    repo = load_manifest()
    manifest = Manifest(models=repo.models, build_dir=repo.build_dir, model_store=store)
    run_dir = tmp_path / "run"
    try:
        assert serve_start(run_dir, properties, 240, manifest) == 0
        output = capsys.readouterr().out
        for model in MODELS:
            line = re.search(rf"^  {model}: (aoti|torchscript) (fp32|bf16|fp16|int8) from (\S+) \(cold load ([\d.]+)s; "
                             r"worker RSS (\d+) MiB\)$", output, re.M)  # fmt: skip
            assert line, output
            assert int(line.group(5)) > 100
        assert re.search(r"^      why [a-z0-9-]+: ", output, re.M), output  # each reason: code, detail
        user_dir = tmp_path / "user"
        user_dir.mkdir()
        (user_dir / ".venv").symlink_to(REPO_ROOT / ".venv")
        commands = printed_commands(output)
        assert sum(command.startswith("curl ") for command in commands) == len(MODELS)
        result = subprocess.run(
            ["bash", "-e", "-c", "\n".join(commands)],
            cwd=user_dir,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        answers = json_documents(result.stdout)
        assert [answer.get("model") for answer in answers] == MODELS, result.stdout
        assert answers[0]["predictions"][0]["label"] and answers[1]["intent"]
    finally:
        serve_stop(run_dir)
