"""Signing in from Python against a real control plane: ``phalanx.login`` / ``logout``
store the same contexts as ``phalanx login``, and CodeFlare's authentication names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import phalanx
from phalanx import AuthError, Client, SpecError
from phalanx.sdk.credentials import current_url
from tests.sdk.live_server import LiveServer, live_server

__all__ = ["live_server"]


@pytest.fixture
def no_key_around(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user with no login yet: empty credentials, no environment key, no server home
    (whose admin key the client would fall back on)."""
    credentials = tmp_path / "credentials.json"
    monkeypatch.setenv("PHALANX_CREDENTIALS", str(credentials))
    monkeypatch.setenv("PHALANX_HOME", str(tmp_path / "no-server"))
    for name in ("PHALANX_URL", "PHALANX_TOKEN", "PHALANX_API_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    return credentials


@pytest.fixture(scope="module")
def ann_key(live_server: LiveServer) -> str:
    with Client(live_server.url, live_server.token) as admin:
        admin.put_user("ann", teams=[])
        return admin.create_key("ann").key


def test_login_stores_the_context_every_client_then_uses(
    live_server: LiveServer, ann_key: str, no_key_around: Path,
) -> None:
    done = phalanx.login(live_server.url, ann_key)
    assert (done.user, done.url, done.path) == ("ann", live_server.url, no_key_around)
    stored = json.loads(no_key_around.read_text())
    assert stored["contexts"][live_server.url] == {"key": ann_key, "user": "ann"}
    assert current_url() == live_server.url
    with Client() as client:  # no URL, no key: the current context
        assert client.whoami().user == "ann"
    assert phalanx.logout() is True
    assert json.loads(no_key_around.read_text())["contexts"] == {}
    assert phalanx.logout(live_server.url) is False
    with Client(live_server.url) as client, pytest.raises(AuthError):
        client.whoami()


def test_a_wrong_key_is_refused_and_nothing_is_stored(
    live_server: LiveServer, no_key_around: Path,
) -> None:
    with pytest.raises(AuthError):
        phalanx.login(live_server.url, "phx_not-a-key")
    assert not no_key_around.exists()
    with pytest.raises(SpecError, match="no API key") as refused:
        phalanx.login(live_server.url, "  ")
    assert refused.value.field == "key"


def test_token_authentication_logs_in_and_out_with_its_tls_choice(
    live_server: LiveServer, ann_key: str, no_key_around: Path,
) -> None:
    auth = phalanx.TokenAuthentication(token=ann_key, server=live_server.url, skip_tls=True)
    assert ann_key not in repr(auth)
    assert auth.login().startswith(f"logged in to {live_server.url} as ann")
    assert json.loads(no_key_around.read_text())["contexts"][live_server.url]["verify"] is False
    with Client() as client:
        assert client.endpoint.verify is False and client.whoami().user == "ann"
    assert auth.logout() == f"logged out of {live_server.url}"
    assert current_url() is None


def test_kubeconfig_file_authentication_uses_a_phalanx_credentials_file(
    live_server: LiveServer, ann_key: str, no_key_around: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    phalanx.login(live_server.url, ann_key)  # writes no_key_around
    other = tmp_path / "elsewhere.json"
    monkeypatch.setenv("PHALANX_CREDENTIALS", str(other))  # a user with no login here
    auth = phalanx.KubeConfigFileAuthentication(kube_config_path=no_key_around)
    assert "current context" in auth.login()
    with Client() as client:
        assert client.whoami().user == "ann"
    auth.logout()
    with Client(live_server.url) as client, pytest.raises(AuthError):
        client.whoami()  # back to the empty file


def test_a_kubernetes_kubeconfig_is_refused_with_the_fix(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\n")
    with pytest.raises(SpecError, match="not a Phalanx credentials file") as refused:
        phalanx.KubeConfigFileAuthentication(kube_config_path=kubeconfig).login()
    assert refused.value.field == "kube_config_path"
    assert "TokenAuthentication" in (refused.value.fix or "")


def test_a_missing_ca_bundle_is_refused_naming_it(
    live_server: LiveServer, ann_key: str, no_key_around: Path, tmp_path: Path,
) -> None:
    auth = phalanx.TokenAuthentication(token=ann_key, server=live_server.url,
                                       ca_cert_path=str(tmp_path / "no-such-ca.pem"))
    with pytest.raises(SpecError, match=r"no-such-ca\.pem") as refused:
        auth.login()
    assert refused.value.field == "verify" and not no_key_around.exists()
