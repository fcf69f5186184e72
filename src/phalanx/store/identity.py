"""Teams, users, API keys and the audit log in the store.

Keys are stored as a hash only (the hashing is the server's: ``server/keys.py``). Each
change is written in one transaction with its audit entry, so the log holds exactly the
changes that happened.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.store.store import Store, insert_audit
from phalanx.store.tables import api_keys, audit_log, jobs, teams, users

ROLES = ("admin", "member", "viewer")
SCOPES = ("all", "read")


@dataclass(frozen=True, slots=True)
class Team:
    name: str
    queues: tuple[str, ...]
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: str
    teams: tuple[str, ...] = ()
    disabled: bool = False
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class StoredKey:
    """An API key as stored: its visible id and the hash of the whole key."""

    id: str
    user: str
    hash: str
    scope: str = "all"
    description: str = ""
    created_at: float = 0.0
    expires_at: float | None = None
    revoked_at: float | None = None

    def usable(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One change: who made it, when, from which client address, what it was."""

    user: str
    client: str
    action: str
    target: str
    detail: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)
    id: int | None = None


def _user(row: Any) -> User:
    return User(row.name, row.role, tuple(row.teams), bool(row.disabled), row.created_at)


def _keep_an_admin(connection: Connection, name: str, change: str) -> None:
    """Conflict if ``name`` is the last enabled admin: ``change`` would leave the control
    plane with no one who may undo it (the bootstrap key included: it is user admin)."""
    admins = set(connection.execute(select(users.c.name).where(
        users.c.role == "admin", users.c.disabled.is_(False))).scalars())
    if admins == {name}:
        raise Conflict(
            f"user {name} is the last enabled admin; {change} would leave no one to "
            "administer the control plane", field="name",
            fix="make another user an admin first (`phalanx users set OTHER --role admin`), "
                "then change this one")


def _refuse_job_owner(connection: Connection, name: str) -> None:
    """Conflict if jobs carry ``name`` as their owner while no user has it: an earlier
    version recorded the local admin's jobs under the OS user its client named, and a
    user created under that name would own them (their secrets, exec, cancel)."""
    if connection.execute(select(jobs.c.name).where(jobs.c.user_name == name).limit(1)
                          ).first() is not None:
        raise Conflict(
            f"jobs were submitted under the name {name} before a user of that name existed "
            "(the local admin key once recorded the OS user); a new user would own them",
            field="name", fix=f"choose another name, or delete those jobs first "
                              f"(`phalanx jobs --user {name}`, then `phalanx delete JOB`)")


def _key(row: Any) -> StoredKey:
    return StoredKey(row.id, row.user_name, row.hash, row.scope, row.description,
                     row.created_at, row.expires_at, row.revoked_at)


class IdentityStore:
    """Reads and writes of the identity tables, on a Store's engine and write lock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    # ------------------------------------------------------------------ teams
    def list_teams(self) -> list[Team]:
        with self.engine.connect() as connection:
            rows = connection.execute(select(teams).order_by(teams.c.name)).all()
        return [Team(r.name, tuple(r.queues), r.created_at) for r in rows]

    def put_team(self, team: Team, audit: AuditEntry) -> bool:
        """Create the team or replace its queues; whether it was new."""
        with self.store.write() as connection:
            found = connection.execute(
                select(teams.c.name).where(teams.c.name == team.name)).first()
            if found is None:
                connection.execute(insert(teams), {"name": team.name, "queues": list(team.queues),
                                                   "created_at": time.time()})
            else:
                connection.execute(update(teams).where(teams.c.name == team.name)
                                   .values(queues=list(team.queues)))
            insert_audit(connection, [audit])
        return found is None

    def delete_team(self, name: str, audit: AuditEntry) -> None:
        """Delete a team no user is in (Conflict naming them otherwise)."""
        with self.store.write() as connection:
            members = sorted(u.name for u in map(_user, connection.execute(select(users)))
                             if name in u.teams)
            if members:
                raise Conflict(
                    f"team {name} has members: {', '.join(members[:5])}", field="team",
                    fix="move them to other teams first (`phalanx users set NAME --team T` "
                        "sets a user's teams), then delete it")
            if connection.execute(delete(teams).where(teams.c.name == name)).rowcount == 0:
                raise NotFound(f"no team {name!r}", field="team",
                               fix="name a team `phalanx teams list` shows")
            insert_audit(connection, [audit])

    def _check_teams(self, connection: Connection, names: Sequence[str]) -> None:
        known = set(connection.execute(select(teams.c.name)).scalars())
        missing = [n for n in names if n not in known]
        if missing:
            raise SpecError(f"no team {missing[0]!r}", field="teams",
                            fix=f"create it first: `phalanx teams create {missing[0]} "
                                "--queue LOCALQUEUE`")

    # ------------------------------------------------------------------ users
    def get_user(self, name: str) -> User:
        with self.engine.connect() as connection:
            row = connection.execute(select(users).where(users.c.name == name)).first()
        if row is None:
            raise NotFound(f"no user {name!r}", field="user",
                           fix="name a user `phalanx users list` shows")
        return _user(row)

    def list_users(self) -> list[User]:
        with self.engine.connect() as connection:
            return [_user(r) for r in connection.execute(select(users).order_by(users.c.name))]

    def count_users(self) -> int:
        with self.engine.connect() as connection:
            return len(connection.execute(select(users.c.name).limit(1)).all())

    def put_user(self, user: User, audit: AuditEntry | None, *,
                 create_only: bool = False, adopt_jobs: bool = False) -> bool:
        """Create the user, or set an existing one's role and teams; whether it was new.

        ``create_only``: Conflict if the user exists (a create never overwrites one).
        Conflict too if it would demote the last enabled admin, or create a user whose
        name jobs already carry (unless ``adopt_jobs``: the bootstrap admin's own)."""
        if user.role not in ROLES:
            raise SpecError(f"unknown role {user.role!r}", field="role",
                            fix=f"use one of {', '.join(ROLES)}")
        with self.store.write() as connection:
            self._check_teams(connection, user.teams)
            found = connection.execute(select(users.c.name).where(users.c.name == user.name)
                                       ).first()
            values = {"role": user.role, "teams": list(user.teams)}
            if found is None:
                if not adopt_jobs:
                    _refuse_job_owner(connection, user.name)
                connection.execute(insert(users), {"name": user.name, "disabled": False,
                                                   "created_at": time.time(), **values})
            elif create_only:
                raise Conflict(
                    f"user {user.name} already exists", field="name",
                    fix=f"change its role or teams with `phalanx users set {user.name} "
                        f"--role ROLE --team TEAM` (PUT /v1/users/{user.name}), or create "
                        "the user under another name")
            else:
                if user.role != "admin":
                    _keep_an_admin(connection, user.name, f"making it a {user.role}")
                connection.execute(update(users).where(users.c.name == user.name).values(values))
            insert_audit(connection, [audit] if audit else [])
        return found is None

    def set_disabled(self, name: str, disabled: bool, audit: AuditEntry) -> None:
        """Disable or enable a user; Conflict if it would disable the last enabled admin."""
        with self.store.write() as connection:
            if disabled:
                _keep_an_admin(connection, name, "disabling it")
            changed = connection.execute(
                update(users).where(users.c.name == name).values(disabled=disabled)).rowcount
            if not changed:
                raise NotFound(f"no user {name!r}", field="user",
                               fix="name a user `phalanx users list` shows")
            insert_audit(connection, [audit])

    # ------------------------------------------------------------------ keys
    def get_key(self, key_id: str) -> StoredKey | None:
        with self.engine.connect() as connection:
            row = connection.execute(select(api_keys).where(api_keys.c.id == key_id)).first()
        return None if row is None else _key(row)

    def list_keys(self, user: str | None = None) -> list[StoredKey]:
        query = select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
        if user is not None:
            query = query.where(api_keys.c.user_name == user)
        with self.engine.connect() as connection:
            return [_key(r) for r in connection.execute(query)]

    def create_key(self, key: StoredKey, audit: AuditEntry | None) -> None:
        try:
            with self.store.write() as connection:
                connection.execute(insert(api_keys), {
                    "id": key.id, "user_name": key.user, "hash": key.hash, "scope": key.scope,
                    "description": key.description, "created_at": key.created_at,
                    "expires_at": key.expires_at, "revoked_at": None,
                })
                insert_audit(connection, [audit] if audit else [])
        except IntegrityError:
            self.get_user(key.user)  # NotFound names the user if that is why
            raise Conflict(f"key id {key.id!r} is taken", field="id",
                           fix="create the key again (ids are random)") from None

    def replace_key(self, key: StoredKey) -> None:
        """Store ``key`` under its id, in force, whatever was there (the bootstrap key)."""
        with self.store.write() as connection:
            connection.execute(delete(api_keys).where(api_keys.c.id == key.id))
            connection.execute(insert(api_keys), {
                "id": key.id, "user_name": key.user, "hash": key.hash, "scope": key.scope,
                "description": key.description, "created_at": key.created_at,
                "expires_at": key.expires_at, "revoked_at": None,
            })

    def revoke_key(self, key_id: str, audit: AuditEntry, user: str | None = None) -> StoredKey:
        """Revoke a key at once (``user``: only if it is that user's); the key as it was."""
        with self.store.write() as connection:
            row = connection.execute(select(api_keys).where(api_keys.c.id == key_id)).first()
            if row is None or (user is not None and row.user_name != user):
                raise NotFound(f"no key {key_id!r}", field="key",
                               fix="name a key id `phalanx keys list` shows")
            if row.revoked_at is None:
                connection.execute(update(api_keys).where(api_keys.c.id == key_id)
                                   .values(revoked_at=audit.time))
                insert_audit(connection, [audit])
        return _key(row)

    def revoked_since(self, since: float) -> list[StoredKey]:
        """Keys revoked after ``since`` (their tokens may still be within their lifetime)."""
        with self.engine.connect() as connection:
            return [_key(r) for r in connection.execute(
                select(api_keys).where(api_keys.c.revoked_at >= since))]

    # ------------------------------------------------------------------ audit
    def append(self, entries: Iterable[AuditEntry]) -> None:
        with self.store.write() as connection:
            insert_audit(connection, list(entries))

    def audit(self, *, since: float | None = None, user: str | None = None,
              limit: int = 1000) -> list[AuditEntry]:
        """Audit entries, oldest first: the last ``limit`` of those since ``since`` by ``user``."""
        query = select(audit_log).order_by(audit_log.c.time.desc(), audit_log.c.id.desc())
        if since is not None:
            query = query.where(audit_log.c.time >= since)
        if user is not None:
            query = query.where(audit_log.c.user_name == user)
        with self.engine.connect() as connection:
            rows = connection.execute(query.limit(limit)).all()
        return [AuditEntry(r.user_name, r.client, r.action, r.target, dict(r.detail), r.time,
                           r.id) for r in reversed(rows)]
