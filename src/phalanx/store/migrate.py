"""Bringing a database's schema up to date with Alembic, configured in code.

Opening a store calls ``upgrade``: one short transaction that compares the
recorded revision with the head and runs the missing migrations, if any. Two
processes opening a new database at once serialise on a lock (an advisory lock
on PostgreSQL, the write lock on SQLite), and the second finds the work done.
"""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from phalanx.errors import ServerError
from phalanx.store.engine import WRITE_OPTION

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant works: it only has to be the same in every process migrating this database.
_PG_MIGRATION_LOCK = 0x70686C78  # "phlx"
_ATTEMPTS = 5


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    head = _scripts().get_current_head()
    assert head is not None, "the store has no migrations"
    return head


def known_revisions() -> set[str]:
    """Every schema revision this version of Phalanx has a migration for."""
    return {s.revision for s in _scripts().walk_revisions()}


def is_after(revision: str, ancestor: str) -> bool:
    """Whether ``revision`` comes after ``ancestor`` (both known)."""
    return revision != ancestor and any(
        s.revision == ancestor for s in _scripts().iterate_revisions(revision, "base"))


def _check_known(current: str | None) -> None:
    """Refuse a database whose schema came from a newer Phalanx rather than guess at it."""
    if current is not None and current not in known_revisions():
        raise ServerError(
            f"the database's schema is at revision {current!r}, which this version of "
            "Phalanx does not know (a newer version migrated it)",
            field="db", fix="upgrade Phalanx, or point --db at another database",
        )


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str | None = None) -> None:
    """Migrate to ``revision`` (default: head), retrying if a concurrent opener races us."""
    target = revision or head_revision()
    current = current_revision(engine)
    if current == target:  # the common case: one cheap read, no lock
        return
    _check_known(current)
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            _upgrade_once(engine, target)
            return
        except DBAPIError:
            # The locks make races unlikely; a retry covers what slips through (for
            # example two first-time opens of one SQLite file creating its WAL at once).
            if attempt == _ATTEMPTS:
                raise
            time.sleep(0.05 * 2**attempt)


def downgrade(engine: Engine, revision: str) -> None:
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
        command.downgrade(alembic_config(connection), revision)


def _upgrade_once(engine: Engine, target: str) -> None:
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
            )
        current = MigrationContext.configure(connection).get_current_revision()
        if current == target:
            return
        _check_known(current)
        command.upgrade(alembic_config(connection), target)
