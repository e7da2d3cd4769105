"""The inference token: $TS_INFERENCE_TOKEN first, then TorchServe's key file; expiry reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbatch.client.auth import TokenError, auth_headers, inference_token, management_token
from tsbatch.environment import TOKEN_ENV


def test_token_from_env_wins_over_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "key_file.json"
    key_file.write_text(
        json.dumps({"management": {"key": "m"}, "inference": {"key": "i-key"}, "API": {"key": "a"}})
    )
    assert inference_token(key_file, env={})[0] == "i-key"
    assert inference_token(key_file, env={TOKEN_ENV: "from-env"}) == ("from-env", f"${TOKEN_ENV}")
    assert inference_token(tmp_path / "absent.json", env={})[0] is None
    assert auth_headers("i-key") == {"Authorization": "Bearer i-key"}
    assert auth_headers(None) == {}


def test_expired_key_is_reported_and_bad_files_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "key_file.json"
    key_file.write_text(
        json.dumps({"inference": {"key": "k", "expiration time": "2001-01-01T00:00:00.123456789Z"}})
    )
    token, source = inference_token(key_file, env={})
    assert token == "k" and "expiration time has passed" in source
    key_file.write_text(json.dumps({"management": {"key": "m"}}))
    with pytest.raises(TokenError):
        inference_token(key_file, env={})


def test_management_key_for_read_only_management_calls(tmp_path: Path) -> None:
    key_file = tmp_path / "key_file.json"
    key_file.write_text(json.dumps({"management": {"key": "m-key"}, "inference": {"key": "i-key"}}))
    assert management_token(key_file) == ("m-key", str(key_file))
    assert management_token(tmp_path / "absent.json")[0] is None
    key_file.write_text(json.dumps({"inference": {"key": "i-key"}}))
    token, why = management_token(key_file)
    assert token is None and "expected {'management'" in why


def test_key_file_knows_expiry_and_names_a_server_that_cannot_refresh(tmp_path: Path) -> None:
    from tsbatch.client.auth import KeyFile
    from tsbatch.server.ports import free_port

    key_file = tmp_path / "key_file.json"
    key_file.write_text(json.dumps({
        "management": {"key": "m", "expiration time": "2001-01-01T00:00:00.123456789Z"},
        "inference": {"key": "i", "expiration time": "2999-01-01T00:00:00.123456789Z"},
        "API": {"key": "a"},
    }))  # fmt: skip
    keys = KeyFile(key_file, f"http://127.0.0.1:{free_port()}", timeout_s=2)
    assert keys.expired("management") and not keys.expired("inference") and not keys.expired("API")
    assert keys.valid_key("inference") == "i"
    with pytest.raises(TokenError, match="is the server running"):
        keys.valid_key("management")  # expired: a refresh is asked of a server that is not there
    with pytest.raises(TokenError, match="does not exist"):
        KeyFile(tmp_path / "absent.json", "http://127.0.0.1:1").key("management")
