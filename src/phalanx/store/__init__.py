"""Persistence of the control plane: jobs, events and config in a database; pod logs on disk."""

from phalanx.store.engine import default_url, parse_url
from phalanx.store.identity import AuditEntry, IdentityStore, StoredKey, Team, User
from phalanx.store.logs import LogStore
from phalanx.store.migrate import current_revision, head_revision
from phalanx.store.store import IdempotentRequest, JobFilter, JobPage, Store

__all__ = [
    "AuditEntry",
    "IdempotentRequest",
    "IdentityStore",
    "JobFilter",
    "JobPage",
    "LogStore",
    "Store",
    "StoredKey",
    "Team",
    "User",
    "current_revision",
    "default_url",
    "head_revision",
    "parse_url",
]
