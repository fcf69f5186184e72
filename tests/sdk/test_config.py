import json
import os
from pathlib import Path

import pytest

from phalanx.defaults import DEFAULT_URL, phalanx_home
from phalanx.errors import AuthError
from phalanx.sdk.config import read_server_info, resolve_endpoint


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("PHALANX_URL", "PHALANX_TOKEN", "PHALANX_HOME", "PHALANX_API_KEY_FILE"):
        monkeypatch.delenv(var, raising=False)


def write_state(home: Path, url: str = "http://127.0.0.1:4321", token: str = "file-token") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "server.json").write_text(json.dumps({"url": url, "pid": os.getpid()}))
    (home / "token").write_text(token + "\n")


def test_home_from_argument_then_env_then_user_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert phalanx_home() == Path.home() / ".phalanx"
    monkeypatch.setenv("PHALANX_HOME", str(tmp_path / "env"))
    assert phalanx_home() == tmp_path / "env"
    assert phalanx_home(tmp_path / "arg") == tmp_path / "arg"


def test_state_directory_files_are_used_when_nothing_else_is_given(tmp_path: Path) -> None:
    write_state(tmp_path)
    endpoint = resolve_endpoint(home=tmp_path)
    assert endpoint.url == "http://127.0.0.1:4321"
    assert endpoint.token == "file-token"
    assert endpoint.home == tmp_path


def test_env_overrides_state_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_state(tmp_path)
    monkeypatch.setenv("PHALANX_URL", "http://10.0.0.5:7780/")
    monkeypatch.setenv("PHALANX_TOKEN", "env-token")
    endpoint = resolve_endpoint(home=tmp_path)
    assert endpoint.url == "http://10.0.0.5:7780"  # trailing slash dropped
    assert endpoint.token == "env-token"


def test_arguments_override_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_state(tmp_path)
    monkeypatch.setenv("PHALANX_URL", "http://10.0.0.5:7780")
    monkeypatch.setenv("PHALANX_TOKEN", "env-token")
    endpoint = resolve_endpoint("http://example:1", "arg-token", home=tmp_path)
    assert (endpoint.url, endpoint.token) == ("http://example:1", "arg-token")


def test_home_is_taken_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_state(tmp_path / "state", url="http://127.0.0.1:9999", token="t9")
    monkeypatch.setenv("PHALANX_HOME", str(tmp_path / "state"))
    endpoint = resolve_endpoint()
    assert (endpoint.url, endpoint.token) == ("http://127.0.0.1:9999", "t9")


def test_defaults_without_any_state(tmp_path: Path) -> None:
    endpoint = resolve_endpoint(home=tmp_path / "empty")
    assert endpoint.url == DEFAULT_URL == "http://127.0.0.1:7780"
    assert endpoint.token is None


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", '"a string"'])
def test_torn_or_foreign_server_file_is_ignored(tmp_path: Path, content: str) -> None:
    (tmp_path / "server.json").write_text(content)
    assert read_server_info(tmp_path) is None
    assert resolve_endpoint(home=tmp_path).url == DEFAULT_URL


def test_empty_token_file_means_no_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("\n")
    assert resolve_endpoint(home=tmp_path).token is None


def test_in_a_pod_the_key_file_is_the_key_unless_a_token_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_state(tmp_path)
    key_file = tmp_path / "api-key"
    key_file.write_text("phj_attempt-key\n")
    monkeypatch.setenv("PHALANX_API_KEY_FILE", str(key_file))
    monkeypatch.setenv("PHALANX_URL", "http://phalanx.ml.svc:7780")
    endpoint = resolve_endpoint(home=tmp_path)
    assert (endpoint.url, endpoint.token) == ("http://phalanx.ml.svc:7780", "phj_attempt-key")
    monkeypatch.setenv("PHALANX_TOKEN", "env-token")
    assert resolve_endpoint(home=tmp_path).token == "env-token"


def test_an_unreadable_key_file_is_an_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_state(tmp_path)
    monkeypatch.setenv("PHALANX_API_KEY_FILE", str(tmp_path / "gone"))
    with pytest.raises(AuthError) as raised:
        resolve_endpoint(home=tmp_path)
    assert raised.value.field == "PHALANX_API_KEY_FILE" and raised.value.fix
