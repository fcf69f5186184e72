"""Store fixtures: every Store test runs on SQLite and on PostgreSQL (see postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.store import Store
from tests.store.postgres import fresh_database, postgres_admin_url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database of its own, once per backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'phalanx.db'}"
        return
    with fresh_database(postgres_admin_url()) as url:
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store(db_url) as opened:
        yield opened
