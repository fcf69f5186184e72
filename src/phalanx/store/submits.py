"""The rows a submit stores, and how the submits of one group commit are written together:
each table's rows of every submit in one statement, so a transaction of a hundred
submits costs a handful of statements, not hundreds."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, insert

from phalanx.store.tables import (
    audit_log,
    idempotency_keys,
    job_events,
    job_labels,
    job_manifests,
    jobs,
)


@dataclass(frozen=True, slots=True)
class IdempotentRequest:
    """A submit that carried an Idempotency-Key: the key, what the request said (a hash),
    and the jobs it created."""

    key: str
    request_hash: str
    jobs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubmitRows:
    """What one submit writes, all or nothing: its jobs' rows, their labels, manifests and
    first events, the Idempotency-Key it came with, and its audit entries."""

    jobs: list[dict[str, Any]]
    labels: list[dict[str, Any]] = field(default_factory=list)
    manifests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    request: IdempotentRequest | None = None
    audit: Sequence[Any] = ()


def insert_submits(connection: Connection, submits: Iterable[SubmitRows]) -> None:
    """Write the submits in ``connection``'s transaction, one statement per table. A name
    or key taken by any of them fails the statement and so the whole transaction (the
    group commit then writes each submit alone, to find whose it was)."""
    submits = list(submits)
    connection.execute(insert(jobs), [row for s in submits for row in s.jobs])
    labels = [row for s in submits for row in s.labels]
    if labels:
        connection.execute(insert(job_labels), labels)
    manifests = [{"job": name, "document": dict(document)}
                 for s in submits for name, document in s.manifests.items()]
    if manifests:
        connection.execute(insert(job_manifests), manifests)
    events = [row for s in submits for row in s.events]
    if events:
        connection.execute(insert(job_events), events)
    now = time.time()
    requests = [{"key": r.key, "request_hash": r.request_hash, "jobs": list(r.jobs),
                 "created_at": now} for s in submits if (r := s.request) is not None]
    if requests:
        connection.execute(insert(idempotency_keys), requests)
    insert_audit(connection, [entry for s in submits for entry in s.audit])


def insert_audit(connection: Connection, entries: Sequence[Any]) -> None:
    """Append audit entries (``store.identity.AuditEntry``) in the caller's transaction."""
    if entries:
        connection.execute(insert(audit_log), [
            {"time": e.time, "user_name": e.user, "client": e.client, "action": e.action,
             "target": e.target, "detail": e.detail} for e in entries])
