"""Initial schema: jobs, job events and the queue configuration.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("queue", sa.String(255), nullable=False),
        sa.Column("cluster_queue", sa.String(255), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("submitted_at", sa.Double, nullable=False),
        sa.Column("finished_at", sa.Double, nullable=True),
        sa.Column("record", sa.JSON, nullable=False),
    )
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_index("ix_jobs_queue", "jobs", ["queue"])
    op.create_index("ix_jobs_submitted_at_name", "jobs", ["submitted_at", "name"])
    op.create_table(
        "job_events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True, autoincrement=True,
        ),
        sa.Column(
            "job", sa.String(255), sa.ForeignKey("jobs.name", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("time", sa.Double, nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(255), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_index("ix_job_events_job_time", "job_events", ["job", "time"])
    op.create_table(
        "queue_config",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("saved_at", sa.Double, nullable=False),
        sa.Column("document", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("queue_config")
    op.drop_index("ix_job_events_job_time", table_name="job_events")
    op.drop_table("job_events")
    op.drop_index("ix_jobs_submitted_at_name", table_name="jobs")
    op.drop_index("ix_jobs_queue", table_name="jobs")
    op.drop_index("ix_jobs_status", table_name="jobs")
    op.drop_table("jobs")
