"""The toolkit's environment variables, read in one place with their types checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsbatch.environment import Environment, EnvironmentSettingError
from tsbatch.paths import REPO_ROOT

SOURCE_DIRS = ("tsbatch", "scripts", "deploy", "loadtest")


def test_defaults_and_overrides() -> None:
    default = Environment.read({})
    assert not default.allow_digits and default.drain_seconds == 15.0 and default.inference_token is None
    assert default.drain_file == Path.cwd() / "draining"
    assert default.cache_dir == Path.home() / ".cache" / "tsbatch" == Environment().cache_dir
    given = Environment.read(
        {
            "TSBATCH_ALLOW_DIGITS": "1",
            "TSBATCH_DRAIN_SECONDS": "0.5",
            "SLA_PROFILE": "cpu",
            "XDG_CACHE_HOME": "/c",
        }
    )
    assert given.allow_digits and given.drain_seconds == 0.5 and given.sla_profile == "cpu"
    assert given.cache_dir == Path("/c/tsbatch")


@pytest.mark.parametrize(
    ("name", "value"),
    [("TSBATCH_ALLOW_DIGITS", "yes"), ("TSBATCH_DRAIN_SECONDS", "soon"), ("TSBATCH_DRAIN_SECONDS", "-1")],
)
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(EnvironmentSettingError, match=name):
        Environment.read({name: value})


def test_no_other_toolkit_module_reads_the_environment() -> None:
    readers = [
        path.relative_to(REPO_ROOT)
        for folder in SOURCE_DIRS
        for path in (REPO_ROOT / folder).rglob("*.py")
        if path.name != "environment.py"
        and ("os.environ.get(" in path.read_text() or "os.getenv(" in path.read_text())
    ]
    assert readers == []
