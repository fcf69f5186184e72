"""Store URLs: drivers, defaults and the errors users see."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from phalanx.errors import ServerError, SpecError
from phalanx.spec import QueueConfig
from phalanx.store import Store, default_url, parse_url
from phalanx.store.engine import display_url


def test_postgresql_urls_use_psycopg_3() -> None:
    for url in ("postgresql://u@db:5432/phalanx", "postgres://u@db:5432/phalanx",
                "postgresql+psycopg://u@db:5432/phalanx"):
        parsed = parse_url(url)
        assert parsed.drivername == "postgresql+psycopg"
        assert (parsed.username, parsed.host, parsed.port, parsed.database) == (
            "u", "db", 5432, "phalanx")


def test_a_bare_path_means_a_sqlite_file(tmp_path: Path) -> None:
    parsed = parse_url(str(tmp_path / "x.db"))
    assert parsed.drivername == "sqlite+pysqlite"
    assert parsed.database == str(tmp_path / "x.db")


@pytest.mark.parametrize("url", ["", "mysql://u@h/db", "sqlite://", "sqlite:///:memory:",
                                 "://nothing"])
def test_unusable_urls_are_refused_naming_the_field(url: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_url(url)
    assert caught.value.field == "db"
    assert caught.value.fix


def test_for_home_defaults_to_a_sqlite_file_in_the_state_directory(tmp_path: Path) -> None:
    home = tmp_path / "new-home"
    with Store.for_home(home) as store:
        assert store.url == default_url(home).replace("sqlite://", "sqlite+pysqlite://")
        store.save_config(QueueConfig())
    assert (home / "phalanx.db").is_file()


def test_for_home_uses_the_given_url(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.db"
    with Store.for_home(tmp_path / "home", f"sqlite:///{other}"):
        pass
    assert other.is_file()
    assert not (tmp_path / "home" / "phalanx.db").exists()


def test_the_displayed_url_hides_the_password() -> None:
    shown = display_url(parse_url("postgresql://u:s3cret@h:5/db"))
    assert shown == "postgresql+psycopg://u:***@h:5/db"


def test_an_unreachable_database_is_a_clear_error() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ServerError) as caught:
        Store(f"postgresql://nobody:pw@127.0.0.1:{port}/none")
    assert caught.value.field == "db"
    assert "pw" not in caught.value.message
    assert str(port) in caught.value.message
