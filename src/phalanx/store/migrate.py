"""Bringing a database's schema up to date with Alembic, configured in code.

Opening a store calls ``upgrade``: one short transaction that compares the
recorded revision with the head and runs the missing migrations, if any. Two
processes opening a new database at once serialise on a lock (an advisory lock
on PostgreSQL, the write lock on SQLite), and the second finds the work done.

Rolling upgrades: migrations expand, then contract. A migration that only adds (tables,
nullable columns or columns with a server default, indexes) says ``expand_only = True``,
and ``tests/store/test_migrations.py`` checks that it does only that. Each upgrade records
in ``schema_info`` the oldest revision whose code may still run on the new schema: the
revision before the run of expand-only migrations that ends at the head. A version that
finds its database at a revision it does not know (a newer version migrated it, mid-way
through a rollout) runs on it without migrating if its own head is that old or newer, and
refuses, saying so, otherwise. A migration that drops or renames what older code reads is a
contract step: ship it one release after the code stopped reading it.
"""

from __future__ import annotations

import logging
import time
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, delete, insert, inspect, select, text
from sqlalchemy.exc import DBAPIError

from phalanx.errors import ServerError
from phalanx.store.engine import WRITE_OPTION
from phalanx.store.tables import schema_info

log = logging.getLogger("phalanx.store")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant works: it only has to be the same in every process migrating this database.
_PG_MIGRATION_LOCK = 0x70686C78  # "phlx"
_ATTEMPTS = 5
OLDEST_READER = "oldest_reader"  # schema_info's row: see the module's docstring


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


def oldest_reader(head: str | None = None) -> str:
    """The oldest revision whose code may run on a schema at ``head`` (default: this
    version's head): every migration after it is ``expand_only``."""
    scripts = _scripts()
    revision = head or head_revision()
    while True:
        script = scripts.get_revision(revision)
        assert script is not None
        if not getattr(script.module, "expand_only", False) or script.down_revision is None:
            return revision
        revision = str(script.down_revision)


def _recorded_reader(connection: Connection) -> str | None:
    if not inspect(connection).has_table(schema_info.name):
        return None
    return connection.execute(select(schema_info.c.value).where(
        schema_info.c.name == OLDEST_READER)).scalar_one_or_none()


def _runs_on_newer(connection: Connection, current: str | None) -> bool:
    """Whether this version runs, unmigrated, on a schema at ``current``: True when it
    is newer than this version's head but recorded that this head may still run on it;
    refused, saying why, when it is newer and may not; False when it is ours to migrate."""
    if current is None or current in known_revisions():
        return False
    reader = _recorded_reader(connection)
    head = head_revision()
    if reader is not None and reader in known_revisions() and (
            reader == head or is_after(head, reader)):
        log.info("the database's schema is at revision %s, newer than this version's %s "
                 "but made only of additions since: running on it without migrating "
                 "(a rolling upgrade under way)", current, head)
        return True
    needs = f"; it needs the code of revision {reader!r} or newer" if reader else ""
    raise ServerError(
        f"the database's schema is at revision {current!r}, which this version of "
        f"Phalanx does not know (a newer version migrated it{needs})",
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
    with engine.connect() as connection:
        if _runs_on_newer(connection, current):
            return
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
        if current == target or _runs_on_newer(connection, current):
            return
        command.upgrade(alembic_config(connection), target)
        if inspect(connection).has_table(schema_info.name):  # not when migrating below it
            connection.execute(delete(schema_info).where(schema_info.c.name == OLDEST_READER))
            connection.execute(insert(schema_info).values(name=OLDEST_READER,
                                                          value=oldest_reader(target)))
