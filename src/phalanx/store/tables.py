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
    Boolean,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
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
    # Who submitted the job: the authenticated user (``phalanx jobs --mine``).
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

# The Kubernetes manifest a job was submitted as (batch Job, JobSet, PyTorchJob, ...), as
# submitted; written with the job, never changed, gone with it. Jobs submitted in Phalanx's
# own form have no row.
job_manifests = Table(
    "job_manifests",
    metadata,
    Column("job", String(255), ForeignKey("jobs.name", ondelete="CASCADE"), primary_key=True),
    Column("document", JSON, nullable=False),
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

# Teams and the LocalQueues their members may submit to.
teams = Table(
    "teams",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("queues", JSON, nullable=False),  # LocalQueue names
    Column("created_at", Double, nullable=False),
)

users = Table(
    "users",
    metadata,
    Column("name", String(253), primary_key=True),
    Column("role", String(16), nullable=False),  # admin | member | viewer
    Column("teams", JSON, nullable=False),  # team names
    Column("disabled", Boolean, nullable=False, server_default=false()),
    Column("created_at", Double, nullable=False),
)

# API keys, only as a hash: the key itself is shown once, at creation. ``id`` is the key's
# visible prefix, so a key can be named (listed, revoked) without being shown.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_name", String(253), ForeignKey("users.name"), nullable=False),
    Column("hash", String(64), nullable=False),  # HMAC-SHA256 of the key, hex
    Column("scope", String(64), nullable=False),  # all | read | plane:<name>
    Column("description", String(255), nullable=False, server_default=""),
    Column("created_at", Double, nullable=False),
    Column("expires_at", Double, nullable=True),
    Column("revoked_at", Double, nullable=True),
    Index("ix_api_keys_user_name", "user_name"),
)

# Every change, appended: who, when, from which client address, what.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", EventId, primary_key=True, autoincrement=True),
    Column("time", Double, nullable=False),
    Column("user_name", String(253), nullable=False),
    Column("client", String(255), nullable=False),
    Column("action", String(32), nullable=False),
    Column("target", Text, nullable=False),
    Column("detail", JSON, nullable=False),
    Index("ix_audit_log_time", "time"),
    Index("ix_audit_log_user_time", "user_name", "time"),
)

# Node pools bought for pending gangs (control/provisioning.py). A row is written before its
# provider is asked to create the pool, so a restarted control plane adopts or deletes what
# it asked for; it stays, in state Deleted, as the history of the job's attempts once the
# provider confirms the pool is gone.
node_pools = Table(
    "node_pools",
    metadata,
    Column("name", String(255), primary_key=True),  # <job>-<attempt>
    Column("job", String(255), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("flavor", String(63), nullable=False),
    Column("provider", String(64), nullable=False),
    Column("config_hash", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("node_count", Integer, nullable=False),
    Column("price_per_node_hour", Double, nullable=False),
    Column("tries", Integer, nullable=False),  # failed deletions, for a cleanup that keeps failing
    Column("blocked_until", Double, nullable=True),  # a backoff or block this pool's end set
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    Column("released_at", Double, nullable=True),  # its owner no longer needed it
    Column("checks", Integer, nullable=False),  # deletion checks passed in a row
    Column("error_kind", String(32), nullable=False),
    Column("message", Text, nullable=False),
    Column("request", JSON, nullable=False),
    Index("ix_node_pools_job", "job", "attempt"),
    Index("ix_node_pools_state", "state"),
)

# Compute planes that dial in (``phalanx plane add``); their keys are the API keys of scope
# ``plane:<name>``. ``last_seen`` is for display only: silence clocks restart with the
# control plane.
planes = Table(
    "planes",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("cordoned", Boolean, nullable=False, server_default=false()),
    Column("draining", Boolean, nullable=False, server_default=false()),
    Column("created_at", Double, nullable=False),
    Column("last_seen", Double, nullable=True),
    # The shortest silence after which its worker's fence has surely stopped its pods (its
    # fence, the pods' stop and a margin): a restarted control plane waits at least this
    # long before it calls the plane lost, even if the worker never reports again.
    Column("fence_needs", Double, nullable=True),
)

# Secrets, encrypted (server/secrets.py): the values only as one authenticated ciphertext of
# the whole key -> value map; the keys' names in clear, for lists. ``owner`` is
# ``team:<name>`` or ``user:<name>``; names are unique per owner, so creating one tells
# nothing of another owner's.
secrets = Table(
    "secrets",
    metadata,
    Column("owner", String(320), primary_key=True),
    Column("name", String(63), primary_key=True),
    Column("type", String(16), nullable=False),  # env | file | ssh | docker
    Column("keys", JSON, nullable=False),
    Column("ciphertext", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("created_by", String(253), nullable=False),
)

# Leadership among replicas of the control plane (store/leases.py): one row per lease, held
# by one replica until ``expires_at`` unless renewed. ``term`` grows by one at each change
# of holder, and every write of the leader checks it in its own transaction (the fence).
leases = Table(
    "leases",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("holder", String(253), nullable=False),
    Column("url", String(2048), nullable=False),  # where the holder answers its API
    Column("term", BigInteger, nullable=False),
    Column("renewed_at", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
)

# Facts about the schema itself (store/migrate.py): ``oldest_reader``, the oldest schema
# revision whose Phalanx may run on this one (every migration since it only added).
schema_info = Table(
    "schema_info",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("value", String(255), nullable=False),
)
