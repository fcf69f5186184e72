"""Leadership among replicas of the control plane: a lease row in the store, and the fence.

One row of ``leases`` per lease. Its holder renews it well before ``expires_at``; once it
has expired, any replica may take it, and taking it (a change of holder) adds one to its
``term``, in the same transaction that reads it, so two replicas never both see
themselves taking one term.

The lease only decides who should lead; the fence makes it safe. A replica that leads
sets ``Store.fence`` to its ``Fence`` (lease name, holder, term), and from then on every
write transaction of the store first reads the lease row (locked in share mode on
PostgreSQL, under SQLite's one writer otherwise) and refuses, with ``NotLeader``, unless
the row still names that holder and term. A new leader's takeover locks the row for
update, so it waits for writes in flight under the old term, and every write after it sees
the new term: a paused or partitioned old leader, resumed, writes nothing.

Clocks matter only to liveness (when a follower may take an expired lease), never to
safety: the term in the row, not a clock, decides whose writes are kept.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from phalanx.defaults import DEFAULT_LEASE_SECONDS as DEFAULT_LEASE_SECONDS  # re-exported
from phalanx.errors import NotLeader, SpecError
from phalanx.store.tables import leases

if TYPE_CHECKING:
    from phalanx.store.store import Store

LEADER_LEASE = "control-plane"  # the lease the control plane's replicas contend for
# The default lease: a leader silent this long is replaced. A follower leads within about
# this long, plus its look period (0.2 s) and the time to build the control plane (a few
# seconds), after the leader's loss: under 15 s.
NOT_LEADER_FIX = "send the request to the leader (GET /readyz answers 200 there); " \
    "clients given several URLs (PHALANX_URL=a,b,c) retry on the next themselves"


@dataclass(frozen=True, slots=True)
class Fence:
    """What the leader's writes carry: the lease, its holder, and the term it won."""

    lease: str
    holder: str
    term: int


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as stored: who holds it, where it answers, its term and until when."""

    name: str
    holder: str
    url: str
    term: int
    renewed_at: float
    expires_at: float

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def fenced_by(self, fence: Fence) -> bool:
        """Whether ``fence`` still leads: this lease names its holder and term."""
        return self.holder == fence.holder and self.term == fence.term


def check_lease_seconds(seconds: float, field: str = "--lease") -> float:
    if not seconds > 0:
        raise SpecError(f"is {seconds:g}s; a lease must last more than 0 s", field=field,
                        fix="write e.g. 10s (a follower leads about this long after the "
                        "leader's loss)")
    return seconds


def _locked_read(connection: Connection, name: str, *, exclusive: bool) -> Lease | None:
    query = select(leases).where(leases.c.name == name)
    if connection.dialect.name == "postgresql":
        # SQLite serialises writers itself (BEGIN IMMEDIATE); PostgreSQL locks the row.
        query = query.with_for_update(read=not exclusive)
    row = connection.execute(query).mappings().one_or_none()
    return Lease(**row) if row is not None else None


def check_fence(connection: Connection, fence: Fence) -> None:
    """Refuse, inside the caller's write transaction, unless ``fence`` still leads.

    The row stays share-locked until the caller commits, so a takeover (which locks it
    for update) cannot slip in between this check and the caller's write.
    """
    lease = _locked_read(connection, fence.lease, exclusive=False)
    if lease is None or not lease.fenced_by(fence):
        now_term = "none" if lease is None else str(lease.term)
        raise NotLeader(
            f"this replica led under term {fence.term}, and the lease {fence.lease!r} is "
            f"now at term {now_term}: it no longer leads, and the write was refused",
            field="leader", fix=NOT_LEADER_FIX,
        )


class LeaseStore:
    """Acquiring, renewing, reading and releasing leases in a store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def read(self, name: str = LEADER_LEASE) -> Lease | None:
        with self.store.engine.connect() as connection:
            row = connection.execute(
                select(leases).where(leases.c.name == name)).mappings().one_or_none()
        return Lease(**row) if row is not None else None

    def try_acquire(
        self, holder: str, url: str, seconds: float, *, name: str = LEADER_LEASE,
        now: float | None = None, take: bool = False,
    ) -> Lease:
        """Renew the lease if ``holder`` holds it, take it if it is free or expired (or, with
        ``take``, whoever holds it: another lease already decided, ``KubeLeaderLease``), in
        one transaction; the lease as it stands after (``holder`` leads if it is named)."""
        check_lease_seconds(seconds)
        now = time.time() if now is None else now
        try:
            # Not Store.write(): taking the lease must not be fenced by the lease itself.
            with self.store.unfenced_write() as connection:
                if connection.dialect.name == "postgresql":
                    # Give up this try rather than wait on a writer that froze mid-write:
                    # the next try comes soon, and the store ends the frozen transaction
                    # (Store.end_idle_transactions_after).
                    connection.execute(text(f"SET LOCAL lock_timeout = {int(seconds * 333)}"))
                lease = _locked_read(connection, name, exclusive=True)
                if lease is None:
                    taken = Lease(name, holder, url, 1, now, now + seconds)
                    connection.execute(insert(leases), asdict(taken))
                    return taken
                if lease.holder != holder and not lease.expired(now) and not take:
                    return lease
                term = lease.term if lease.holder == holder else lease.term + 1
                connection.execute(
                    update(leases).where(leases.c.name == name).values(
                        holder=holder, url=url, term=term, renewed_at=now,
                        expires_at=now + seconds))
                return Lease(name, holder, url, term, now, now + seconds)
        except IntegrityError:
            # Another replica created the row first; it holds the first term.
            lease = self.read(name)
            assert lease is not None
            return lease

    def release(self, fence: Fence) -> bool:
        """Give the lease up now (a planned stop), if ``fence`` still holds it: it expires at
        once, so a follower takes it at its next try. Whether it was released."""
        with self.store.unfenced_write() as connection:
            lease = _locked_read(connection, fence.lease, exclusive=True)
            if lease is None or not lease.fenced_by(fence):
                return False
            connection.execute(update(leases).where(leases.c.name == fence.lease)
                               .values(expires_at=time.time()))
        return True
