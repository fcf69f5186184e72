"""Turning a store URL into a configured SQLAlchemy engine.

SQLite is the embedded default; PostgreSQL is reached through psycopg 3 whatever
driver the URL names (``postgresql://`` and ``postgres://`` are rewritten), so
users never have to know SQLAlchemy's driver syntax.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError

from phalanx.defaults import open_private, redact_url
from phalanx.errors import SpecError, chain

DB_FILE = "phalanx.db"
URL_FIX = "use sqlite:///PATH/TO/phalanx.db or postgresql://USER@HOST:PORT/DATABASE"
# How long a SQLite writer waits for another process's write to finish before failing.
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Execution option that marks a connection as about to write; see _begin_sqlite.
WRITE_OPTION = "phalanx_write"


CONNECT_TIMEOUT_SECONDS = 5


def default_url(home: Path) -> str:
    """The SQLite file in a state directory."""
    return f"sqlite:///{home / DB_FILE}"


def parse_url(url: str) -> URL:
    """Validate a store URL and pick the driver; a bare path means a SQLite file."""
    text = url.strip()
    if not text:
        raise SpecError("is empty", field="db", fix=URL_FIX)
    if "://" not in text:
        text = f"sqlite:///{Path(text).expanduser()}"
    try:
        parsed = make_url(text)
    except ArgumentError:
        raise SpecError(f"{url!r} is not a database URL", field="db", fix=URL_FIX) from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise SpecError(
                "an in-memory SQLite database cannot be shared by the control plane's threads",
                field="db", fix="give a file path: sqlite:///PATH/TO/phalanx.db",
            )
        return parsed.set(drivername="sqlite+pysqlite")
    raise SpecError(f"unsupported database {backend!r}", field="db", fix=URL_FIX)


def display_url(url: URL) -> str:
    """The URL with any password masked, for logs and status output."""
    return redact_url(url.render_as_string(hide_password=False))


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def create_store_engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    # pre_ping: a PostgreSQL restart must cost one reconnect, not a failed API request.
    # connect_timeout: a server that cannot be reached is said within seconds, not after
    # the system's TCP timeout (minutes), so requests are refused rather than left waiting.
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=20,
                         connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS})


def unavailable_reason(exc: BaseException) -> str | None:
    """Why the store could not be used, when ``exc`` (or what it wraps) says the database
    could not be reached or dropped the connection: its first line; None for any other
    failure (a constraint, a bug, a full disk: ``phalanx.errors.is_no_space``)."""
    for current in chain(exc):
        if isinstance(current, DBAPIError) and (
                current.connection_invalidated or isinstance(current, InterfaceError)
                or (isinstance(current, OperationalError) and _unreachable(current))):
            lines = str(current.orig or current).strip().splitlines()
            return lines[0][:200] if lines else type(current).__name__
    return None


# SQLite's OperationalError also says "no such table", a syntax error, a lock timeout:
# failures of this process, not a store it cannot reach. These say the file is not usable.
_SQLITE_UNREACHABLE = ("unable to open database", "disk i/o error")


def _unreachable(error: OperationalError) -> bool:
    """Whether an OperationalError says the database cannot be reached: any from a server
    (PostgreSQL's are about its connection, or the server itself), only some from SQLite."""
    if type(error.orig).__module__.split(".")[0] != "sqlite3":
        return True
    return str(error.orig).lower().startswith(_SQLITE_UNREACHABLE)


def _sqlite_engine(url: URL) -> Engine:
    assert url.database is not None
    path = Path(url.database).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    # The store holds every job's spec, secrets in env included: owner-only from the
    # start (SQLite gives its -wal and -shm files the database file's mode).
    os.close(open_private(path, os.O_RDWR))
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        pool_size=5,
        max_overflow=20,
    )
    event.listen(engine, "connect", _configure_sqlite)
    event.listen(engine, "begin", _begin_sqlite)
    return engine


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy, not the sqlite3 module, decide where transactions begin, so DDL
    # stays transactional and writers can take the lock up front (see _begin_sqlite).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        _use_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch the database to write-ahead logging, which it then keeps for good.

    Switching needs the database to itself, and SQLite answers "database is locked" at
    once rather than through the busy timeout when another process has it open, as when
    several processes open a new database together: retry until the timeout.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
                return
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _begin_sqlite(connection: Any) -> None:
    # A deferred transaction that reads and then writes fails at once with SQLITE_BUSY if
    # another writer committed in between; BEGIN IMMEDIATE takes the write lock first and
    # waits for it under busy_timeout instead.
    write = connection.get_execution_options().get(WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
