"""Which store failures say the database cannot be reached (503, the leader not ready)
and which are a failure of this process (500): ``store.engine.unavailable_reason``."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from phalanx.store.engine import unavailable_reason


def _error(url: str, statement: str) -> DBAPIError:
    engine = create_engine(url)
    try:
        with pytest.raises(DBAPIError) as caught, engine.connect() as connection:
            connection.execute(text(statement))
        return caught.value
    finally:
        engine.dispose()


def test_a_missing_table_is_not_an_unreachable_store(tmp_path: Path) -> None:
    error = _error(f"sqlite:///{tmp_path / 'db'}", "SELECT * FROM job_events")
    assert "no such table" in str(error)
    assert unavailable_reason(error) is None


def test_a_database_file_that_cannot_be_opened_is(tmp_path: Path) -> None:
    error = _error(f"sqlite:///{tmp_path / 'missing' / 'db'}", "SELECT 1")
    reason = unavailable_reason(error)
    assert reason is not None and "unable to open database" in reason


def test_a_server_that_refuses_connections_is() -> None:
    pytest.importorskip("psycopg")
    error = _error("postgresql+psycopg://nobody@127.0.0.1:1/none", "SELECT 1")
    reason = unavailable_reason(error)
    assert reason is not None
