"""Backups of a control plane: a consistent snapshot of the store and the state directory's
keys, encrypted under a passphrase, and its restore onto a new, empty store.

The snapshot reads every table in one read transaction (``REPEATABLE READ`` on PostgreSQL,
one ``BEGIN`` on SQLite's write-ahead log), so it is one instant of the store however
many writes run meanwhile. The leases table is left out: a restored store starts with no
leader, and its first replica takes the lease under term 1. The keys are the files a
control plane cannot work without and never keeps in the store: the API keys' pepper,
the token signing keys, the bootstrap key, the secrets' encryption keys and the control
plane's identity (without them the restored API keys, tokens and secrets are useless).

The file is ``MAGIC``, a random salt, then a Fernet token (AES-128-CBC and HMAC-SHA256,
as the secrets use) of the zlib-compressed JSON, under a key derived from the passphrase
with scrypt. A wrong passphrase or an altered file fails the HMAC: nothing is restored.

A restore writes every row in one transaction, after checking, in it, that the store has
no row at all; the store is migrated to the backup's schema revision first and to this
version's head after, so a backup taken by an older version restores into a newer one.
Nothing runs twice: a restored job that was running is found as a restarted control plane
finds it (``control/loop.py``'s ``recover``): re-adopted if its plane still runs its pods,
else counted lost and restarted under its restart policy.
"""

from __future__ import annotations

import base64
import json
import os
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.runtime.migration import MigrationContext
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from sqlalchemy import Connection, Engine, func, insert, inspect, select, text

from phalanx.defaults import replace_private
from phalanx.errors import Conflict, NotFound, ServerError, SpecError
from phalanx.store import migrate
from phalanx.store.engine import WRITE_OPTION, create_store_engine, display_url, parse_url
from phalanx.store.tables import leases, metadata, schema_info

MAGIC = b"PHALANX-BACKUP-1\n"
SALT_BYTES = 16
# The state directory's files a control plane needs with its store (server/keys.py,
# server/tokens.py, server/secrets.py; a test checks these names against theirs).
STATE_FILES = ("key-pepper", "signing-keys.json", "token", "secret-keys.json",
               "control-plane-id")
SKIPPED_TABLES = frozenset({leases.name, schema_info.name})  # who leads; what the schema is
PASSPHRASE_ENV = "PHALANX_BACKUP_PASSPHRASE"
PASSPHRASE_FIX = ("give it with --passphrase-file FILE or $PHALANX_BACKUP_PASSPHRASE; keep "
                  "it apart from the backup: whoever has both has every key and secret")
_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a backup holds: the schema revision, every table's rows, the state files."""

    revision: str
    created_at: float
    tables: dict[str, list[dict[str, Any]]]
    files: dict[str, str]

    def count(self, table: str) -> int:
        return len(self.tables.get(table, ()))


def _tables() -> list[Any]:
    """The tables a backup holds, parents before children (foreign keys)."""
    return [t for t in metadata.sorted_tables if t.name not in SKIPPED_TABLES]


def _engine(url: str, *, existing: bool = False) -> Engine:
    parsed = parse_url(url)
    if existing and parsed.get_backend_name() == "sqlite" and not Path(
            str(parsed.database)).exists():
        # Opening it would create an empty store, and back that up.
        raise NotFound(f"there is no store at {parsed.database}", field="--db",
                       fix="give the control plane's store with --db, or its state "
                       "directory with --home")
    return create_store_engine(parsed)


def _revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def take_snapshot(url: str, home: Path) -> Snapshot:
    """Every table of the store at ``url``, read in one transaction, and ``home``'s keys."""
    engine = _engine(url, existing=True)
    try:
        connection = engine.connect()
        if connection.dialect.name == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection, connection.begin():
            revision = _revision(connection)
            if revision != migrate.head_revision():
                raise ServerError(
                    f"the store at {display_url(engine.url)} is at schema revision "
                    f"{revision!r}, not this version's {migrate.head_revision()!r}",
                    field="db", fix="back it up with the version of Phalanx that runs it "
                    "(or start this version on it once, which migrates it)")
            tables = {t.name: [dict(row) for row in connection.execute(select(t)).mappings()]
                      for t in _tables()}
    finally:
        engine.dispose()
    files = {}
    for name in STATE_FILES:
        try:
            files[name] = (home / name).read_text()
        except FileNotFoundError:
            continue
    if "secret-keys.json" not in files and tables.get("secrets"):
        raise ServerError(f"the store has secrets but {home / 'secret-keys.json'} is missing",
                          field="--home", fix="run the backup with the control plane's own "
                          "state directory (--home)")
    return Snapshot(revision, time.time(), tables, files)


def restore_snapshot(snapshot: Snapshot, url: str, home: Path) -> None:
    """Write ``snapshot``'s keys into ``home`` and its rows into the empty store at ``url``
    (all or none). Conflict naming ``--db`` if the store has any row, ``--home`` if a key
    file there differs from the backup's (nothing is written then)."""
    _check_home(snapshot, home)
    engine = _engine(url)
    try:
        if snapshot.revision not in migrate.known_revisions():
            raise SpecError(f"the backup is of schema revision {snapshot.revision!r}, which "
                            "this version of Phalanx does not know (a newer one wrote it)",
                            field="FILE", fix="restore it with that version of Phalanx or a "
                            "newer one")
        where = display_url(engine.url)
        _check_empty(engine, where)
        # The keys first: a restore cut short leaves keys without rows (a retry writes the
        # same files again), never rows without the keys they were written with.
        _write_files(snapshot.files, home)
        # An empty store can be moved to any revision: the backup's, to take its rows as
        # they are, then this version's head.
        current = migrate.current_revision(engine)
        if current is not None and migrate.is_after(current, snapshot.revision):
            migrate.downgrade(engine, snapshot.revision)
        migrate.upgrade(engine, snapshot.revision)
        with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
            _check_empty(connection, where)
            for table in _tables():
                rows = snapshot.tables.get(table.name, [])
                for start in range(0, len(rows), _BATCH):
                    connection.execute(insert(table), rows[start:start + _BATCH])
            if connection.dialect.name == "postgresql":
                _advance_sequences(connection)
        migrate.upgrade(engine)
    finally:
        engine.dispose()


def _check_empty(bind: Engine | Connection, where: str) -> None:
    def rows_in(connection: Connection) -> list[str]:
        present = set(inspect(connection).get_table_names())
        return [t.name for t in _tables() if t.name in present and
                connection.execute(select(func.count()).select_from(t)).scalar_one()]

    if isinstance(bind, Connection):
        full = rows_in(bind)
    else:
        with bind.connect() as connection:
            full = rows_in(connection)
    if full:
        raise Conflict(f"the store at {where} is not empty (it has rows in "
                       f"{', '.join(full)}); a backup is restored only onto a new store",
                       field="--db", fix="point --db at a new, empty database (or a new "
                       "SQLite file), so nothing of another control plane is mixed in")


def _advance_sequences(connection: Connection) -> None:
    """PostgreSQL hands out ids from sequences: start them after the restored ids."""
    for table in _tables():
        for column in table.primary_key.columns:
            if column.autoincrement is True:
                connection.execute(text(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', '{column.name}'), "
                    f"COALESCE((SELECT MAX({column.name}) FROM {table.name}), 0) + 1, false)"))


def _check_home(snapshot: Snapshot, home: Path) -> None:
    for name, content in snapshot.files.items():
        try:
            present = (home / name).read_text()
        except FileNotFoundError:
            continue
        if present != content:
            raise Conflict(f"{home / name} exists and differs from the backup's", field="--home",
                           fix="restore into a new state directory (--home), so the restored "
                           "store gets the keys it was written with")


def _write_files(files: Mapping[str, str], home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, content in files.items():
        replace_private(home / name, content, home / f".{name}.restoring")


# ---------------------------------------------------------------------- the file
def _fernet(passphrase: bytes, salt: bytes) -> Fernet:
    key = Scrypt(salt=salt, length=32, n=2**15, r=8, p=1).derive(passphrase)
    return Fernet(base64.urlsafe_b64encode(key))


def seal(snapshot: Snapshot, passphrase: bytes) -> bytes:
    """The backup file's bytes."""
    document = {"format": 1, "revision": snapshot.revision, "createdAt": snapshot.created_at,
                "tables": snapshot.tables, "files": snapshot.files}
    plain = zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 6)
    salt = os.urandom(SALT_BYTES)
    return MAGIC + salt + _fernet(passphrase, salt).encrypt(plain)


def unseal(data: bytes, passphrase: bytes) -> Snapshot:
    """The snapshot in a backup file's bytes; SpecError if it is not one or the passphrase
    is not its own."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + SALT_BYTES:
        raise SpecError("is not a Phalanx backup", field="FILE",
                        fix="give a file written by `phalanx backup`")
    salt = data[len(MAGIC):len(MAGIC) + SALT_BYTES]
    try:
        plain = _fernet(passphrase, salt).decrypt(data[len(MAGIC) + SALT_BYTES:])
    except InvalidToken:
        raise SpecError("does not decrypt with this passphrase (or the file was altered)",
                        field="passphrase", fix="give the passphrase the backup was written "
                        "with") from None
    document = json.loads(zlib.decompress(plain))
    return Snapshot(document["revision"], float(document["createdAt"]), document["tables"],
                    document["files"])
