"""The store's tables, as the latest migration leaves them.

Jobs keep the columns the control plane filters and sorts on, plus the whole
JobRecord as JSON, so a new JobRecord field needs no migration. Changing this
file means adding a migration in ``migrations/versions``; a test checks that
the two agree.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit identity.
EventId = BigInteger().with_variant(Integer(), "sqlite")

jobs = Table(
    "jobs",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("queue", String(255), nullable=False),
    Column("cluster_queue", String(255), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("submitted_at", Double, nullable=False),
    Column("finished_at", Double, nullable=True),
    Column("record", JSON, nullable=False),
    # Who submitted the job (informational until the API authenticates users).
    Column("user_name", String(253), nullable=False, server_default="unknown"),
    Index("ix_jobs_submitted_at_name", "submitted_at", "name"),
    # Lists come newest first, filtered: each filter leads an index that is already in
    # that order, so the first page reads a page of rows, not every job of the filter.
    Index("ix_jobs_status_submitted", "status", "submitted_at", "name"),
    Index("ix_jobs_queue_submitted", "queue", "submitted_at", "name"),
    Index("ix_jobs_user_submitted", "user_name", "submitted_at", "name"),
    # Finished jobs past their TTL, oldest first.
    Index("ix_jobs_finished_at", "finished_at"),
)

# A job's labels, one row each, so a label selector is an index look-up. Written with the
# job (labels are part of its spec and never change) and gone with it.
job_labels = Table(
    "job_labels",
    metadata,
    Column("job", String(255), ForeignKey("jobs.name", ondelete="CASCADE"), primary_key=True),
    Column("key", String(317), primary_key=True),
    Column("value", String(63), nullable=False),
    # With the job in it, a selector is answered from the index alone.
    Index("ix_job_labels_key_value", "key", "value", "job"),
)

job_events = Table(
    "job_events",
    metadata,
    Column("id", EventId, primary_key=True, autoincrement=True),
    Column("job", String(255), ForeignKey("jobs.name", ondelete="CASCADE"), nullable=False),
    Column("time", Double, nullable=False),
    Column("type", String(32), nullable=False),
    Column("reason", String(255), nullable=False),
    Column("message", Text, nullable=False),
    Index("ix_job_events_job_time", "job", "time"),
)

# One row (id 1) holding the whole queue configuration: it is read and replaced whole.
queue_config = Table(
    "queue_config",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("revision", Integer, nullable=False),
    Column("saved_at", Double, nullable=False),
    Column("document", JSON, nullable=False),
)

# The answer of each submit that carried an Idempotency-Key: a retried request with the key
# gets the same jobs back instead of a second submit. Written in the transaction that
# creates the jobs, so a key is stored exactly when its jobs are.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("request_hash", String(64), nullable=False),  # sha256 of the request, hex
    Column("jobs", JSON, nullable=False),  # the names of the jobs it created, in order
    Column("created_at", Double, nullable=False),
)
