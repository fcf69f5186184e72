"""Node pools in the store: what the provisioning controller asked for, before it asked.

Each row is one pool (one attempt of one job). The controller writes a row in state Intent
before it calls its provider, moves it through Creating, Ready, Idle and Deleting, and marks
it Deleted once the provider confirms the pool is gone; Deleted rows are the job's history
of attempts (why-pending lists them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, insert, select, update

from phalanx.store.store import Store
from phalanx.store.tables import node_pools


class PoolPhase(StrEnum):
    INTENT = "Intent"  # recorded; the provider may or may not have been asked yet
    CREATING = "Creating"  # the provider accepted it; not every node Ready yet
    READY = "Ready"  # every node Ready: its job is placed on it, or about to be
    IDLE = "Idle"  # its job ended; kept for idleTTL for the next job of the same shape
    DELETING = "Deleting"  # deletion asked; waiting for the provider to confirm
    DELETED = "Deleted"  # confirmed gone (kept as history)


LIVE_PHASES = (PoolPhase.INTENT, PoolPhase.CREATING, PoolPhase.READY, PoolPhase.IDLE,
               PoolPhase.DELETING)
# A job's pool in one of these is the one the job is using or waiting for (at most one).
OWNED_PHASES = (PoolPhase.INTENT, PoolPhase.CREATING, PoolPhase.READY)


@dataclass(slots=True)
class PoolRecord:
    name: str
    job: str
    attempt: int
    flavor: str
    provider: str
    config_hash: str
    state: PoolPhase
    node_count: int
    price_per_node_hour: float
    created_at: float
    updated_at: float
    tries: int = 0
    blocked_until: float | None = None
    released_at: float | None = None
    checks: int = 0
    error_kind: str = ""
    message: str = ""
    request: dict[str, Any] = field(default_factory=dict)

    @property
    def cost_per_hour(self) -> float:
        return self.node_count * self.price_per_node_hour

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        return data


def _record(row: Any) -> PoolRecord:
    data = dict(row._mapping)
    data["state"] = PoolPhase(data["state"])
    return PoolRecord(**data)


class PoolStore:
    """Reads and writes of the node_pools table, on a Store's engine."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    def insert(self, record: PoolRecord) -> None:
        with self.store.write() as connection:
            connection.execute(insert(node_pools).values(**record.row()))

    def save(self, record: PoolRecord) -> None:
        with self.store.write() as connection:
            connection.execute(update(node_pools).where(node_pools.c.name == record.name)
                               .values(**record.row()))

    def get(self, name: str) -> PoolRecord | None:
        with self.engine.connect() as connection:
            row = connection.execute(
                select(node_pools).where(node_pools.c.name == name)).first()
        return None if row is None else _record(row)

    def live(self) -> list[PoolRecord]:
        """Every pool not yet confirmed gone, oldest first."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(node_pools).where(node_pools.c.state.in_([p.value for p in LIVE_PHASES]))
                .order_by(node_pools.c.created_at, node_pools.c.name)).all()
        return [_record(r) for r in rows]

    def of_job(self, job: str) -> list[PoolRecord]:
        """The job's pools, every attempt, in order."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(node_pools).where(node_pools.c.job == job)
                .order_by(node_pools.c.attempt)).all()
        return [_record(r) for r in rows]

    def last_attempt(self, job: str) -> int:
        return max((r.attempt for r in self.of_job(job)), default=0)

    def forget_job(self, job: str) -> int:
        """Drop the history of a job whose pools are all gone; rows dropped."""
        with self.store.write() as connection:
            result = connection.execute(delete(node_pools).where(
                node_pools.c.job == job, node_pools.c.state == PoolPhase.DELETED.value))
        return int(result.rowcount or 0)
