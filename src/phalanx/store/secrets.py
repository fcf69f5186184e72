"""Secrets in the store: ciphertexts only (the encryption is the server's, ``server/secrets.py``).

Each change is written in one transaction with its audit entry, which names the secret and
its keys, never a value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from phalanx.errors import Conflict, NotFound
from phalanx.store.identity import AuditEntry
from phalanx.store.store import Store, insert_audit
from phalanx.store.tables import secrets

TEAM_OWNER, USER_OWNER = "team:", "user:"


@dataclass(frozen=True, slots=True)
class StoredSecret:
    owner: str  # team:<name> | user:<name>
    name: str
    type: str
    keys: tuple[str, ...]
    ciphertext: str
    created_at: float
    created_by: str


def _secret(row: Any) -> StoredSecret:
    return StoredSecret(row.owner, row.name, row.type, tuple(row.keys), row.ciphertext,
                        row.created_at, row.created_by)


def _missing(name: str) -> NotFound:
    return NotFound(f"no secret {name!r}", field="name",
                    fix="name a secret `phalanx secrets list` shows")


class SecretStore:
    """Reads and writes of the secrets table, on a Store's engine and write lock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    def list(self, owners: Sequence[str] | None = None) -> list[StoredSecret]:
        """The secrets of ``owners`` (None: every owner's), by owner and name."""
        query = select(secrets).order_by(secrets.c.owner, secrets.c.name)
        if owners is not None:
            query = query.where(secrets.c.owner.in_(list(owners)))
        with self.engine.connect() as connection:
            return [_secret(r) for r in connection.execute(query)]

    def get(self, owner: str, name: str) -> StoredSecret | None:
        with self.engine.connect() as connection:
            row = connection.execute(select(secrets).where(
                and_(secrets.c.owner == owner, secrets.c.name == name))).first()
        return None if row is None else _secret(row)

    def create(self, secret: StoredSecret, audit: AuditEntry) -> None:
        try:
            with self.store.write() as connection:
                connection.execute(insert(secrets), {
                    "owner": secret.owner, "name": secret.name, "type": secret.type,
                    "keys": list(secret.keys), "ciphertext": secret.ciphertext,
                    "created_at": secret.created_at, "created_by": secret.created_by})
                insert_audit(connection, [audit])
        except IntegrityError:
            raise Conflict(f"secret {secret.name!r} exists", field="name",
                           fix=f"delete it first (`phalanx secrets delete {secret.name}`), or "
                               "choose another name") from None

    def delete(self, owner: str, name: str, audit: AuditEntry) -> StoredSecret:
        with self.store.write() as connection:
            row = connection.execute(select(secrets).where(
                and_(secrets.c.owner == owner, secrets.c.name == name))).first()
            if row is None:
                raise _missing(name)
            connection.execute(delete(secrets).where(
                and_(secrets.c.owner == owner, secrets.c.name == name)))
            insert_audit(connection, [audit])
        return _secret(row)

    def reencrypt(self, convert: Callable[[str], str]) -> int:
        """Replace every ciphertext by ``convert(ciphertext)`` in one transaction (a key
        rotation); how many there were."""
        with self.store.write() as connection:
            rows = connection.execute(select(secrets.c.owner, secrets.c.name,
                                             secrets.c.ciphertext)).all()
            for row in rows:
                connection.execute(
                    update(secrets).where(and_(secrets.c.owner == row.owner,
                                               secrets.c.name == row.name))
                    .values(ciphertext=convert(row.ciphertext)))
        return len(rows)
