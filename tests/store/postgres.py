"""Throw-away PostgreSQL databases for the store tests.

The server comes from PHALANX_TEST_POSTGRES_URL (a superuser URL, see
scripts/postgres.sh). Without it the PostgreSQL cases are skipped, except under
CI, where they fail so that a broken CI set-up cannot hide them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

POSTGRES_ENV = "PHALANX_TEST_POSTGRES_URL"


def postgres_admin_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(
            f"{POSTGRES_ENV} is not set under CI: the PostgreSQL store tests would be skipped; "
            "source scripts/postgres.sh before running pytest"
        )
    pytest.skip(f"{POSTGRES_ENV} is not set (source scripts/postgres.sh to run these)")


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """Create an empty database, yield its URL, then drop it (closing its connections)."""
    admin = make_url(admin_url).set(drivername="postgresql")
    conninfo = admin.render_as_string(hide_password=False)
    name = f"phalanx_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
