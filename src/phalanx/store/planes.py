"""The registry of compute planes that dial in: name, cordon/drain flags, when last seen."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from phalanx.errors import Conflict, NotFound
from phalanx.store.identity import AuditEntry
from phalanx.store.store import Store, insert_audit
from phalanx.store.tables import planes


@dataclass(frozen=True, slots=True)
class RegisteredPlane:
    name: str
    cordoned: bool = False
    draining: bool = False
    created_at: float = 0.0
    last_seen: float | None = None
    fence_needs: float | None = None  # seconds of silence its worker's fence needs


def _not_found(name: str) -> NotFound:
    return NotFound(f"no compute plane {name!r}", field="name",
                    fix="name a plane `phalanx plane list` shows")


class PlaneStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def list(self) -> list[RegisteredPlane]:
        with self.store.engine.connect() as connection:
            rows = connection.execute(select(planes).order_by(planes.c.name)).all()
        return [RegisteredPlane(r.name, r.cordoned, r.draining, r.created_at, r.last_seen,
                                r.fence_needs) for r in rows]

    def get(self, name: str) -> RegisteredPlane:
        for plane in self.list():
            if plane.name == name:
                return plane
        raise _not_found(name)

    def add(self, name: str, audit: AuditEntry) -> RegisteredPlane:
        plane = RegisteredPlane(name, created_at=time.time())
        try:
            with self.store.write() as connection:
                connection.execute(insert(planes), {"name": name, "cordoned": False,
                                                    "draining": False,
                                                    "created_at": plane.created_at})
                insert_audit(connection, [audit])
        except IntegrityError:
            raise Conflict(f"compute plane {name!r} exists", field="name",
                           fix="choose another name, or rotate its key with "
                               f"`phalanx plane add {name} --rotate`") from None
        return plane

    def set_flags(self, name: str, audit: AuditEntry, *, cordoned: bool | None = None,
                  draining: bool | None = None) -> RegisteredPlane:
        values: dict[str, bool] = {}
        if cordoned is not None:
            values["cordoned"] = cordoned
        if draining is not None:
            values["draining"] = draining
        with self.store.write() as connection:
            done = connection.execute(update(planes).where(planes.c.name == name)
                                      .values(**values)).rowcount
            if not done:
                raise _not_found(name)
            insert_audit(connection, [audit])
        return self.get(name)

    def seen(self, name: str, when: float, fence_needs: float | None = None) -> None:
        values: dict[str, float] = {"last_seen": when}
        if fence_needs is not None:
            values["fence_needs"] = fence_needs
        with self.store.write() as connection:
            connection.execute(update(planes).where(planes.c.name == name).values(**values))

    def remove(self, name: str, audit: AuditEntry) -> None:
        with self.store.write() as connection:
            if not connection.execute(delete(planes).where(planes.c.name == name)).rowcount:
                raise _not_found(name)
            insert_audit(connection, [audit])
