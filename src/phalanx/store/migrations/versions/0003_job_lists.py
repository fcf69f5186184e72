"""Job lists: who submitted a job, its labels, and indexes for filtered pages and TTLs.

Adds ``jobs.user_name``, the ``job_labels`` table (filled from the stored records), one
index per list filter in newest-first order, and one on ``finished_at`` for the TTL of
finished jobs. The single-column status and queue indexes are dropped: the new ones lead
with the same columns.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    op.add_column("jobs", sa.Column("user_name", sa.String(253), nullable=False,
                                    server_default="unknown"))
    op.drop_index("ix_jobs_status", table_name="jobs")
    op.drop_index("ix_jobs_queue", table_name="jobs")
    op.create_index("ix_jobs_status_submitted", "jobs", ["status", "submitted_at", "name"])
    op.create_index("ix_jobs_queue_submitted", "jobs", ["queue", "submitted_at", "name"])
    op.create_index("ix_jobs_user_submitted", "jobs", ["user_name", "submitted_at", "name"])
    op.create_index("ix_jobs_finished_at", "jobs", ["finished_at"])
    labels = op.create_table(
        "job_labels",
        sa.Column("job", sa.String(255), sa.ForeignKey("jobs.name", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("key", sa.String(317), primary_key=True),
        sa.Column("value", sa.String(63), nullable=False),
    )
    op.create_index("ix_job_labels_key_value", "job_labels", ["key", "value", "job"])
    # Jobs stored before this revision keep their labels inside the record only.
    jobs = sa.table("jobs", sa.column("name", sa.String), sa.column("record", sa.JSON))
    connection = op.get_bind()
    rows = []
    for name, record in connection.execute(sa.select(jobs.c.name, jobs.c.record)):
        for key, value in ((record or {}).get("spec") or {}).get("labels", {}).items():
            rows.append({"job": name, "key": key, "value": value})
            if len(rows) >= _BATCH:
                op.bulk_insert(labels, rows)
                rows = []
    if rows:
        op.bulk_insert(labels, rows)


def downgrade() -> None:
    op.drop_index("ix_job_labels_key_value", table_name="job_labels")
    op.drop_table("job_labels")
    op.drop_index("ix_jobs_finished_at", table_name="jobs")
    op.drop_index("ix_jobs_user_submitted", table_name="jobs")
    op.drop_index("ix_jobs_queue_submitted", table_name="jobs")
    op.drop_index("ix_jobs_status_submitted", table_name="jobs")
    op.create_index("ix_jobs_queue", "jobs", ["queue"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("user_name")
