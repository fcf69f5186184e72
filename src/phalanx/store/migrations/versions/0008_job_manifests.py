"""The Kubernetes manifest a job was submitted as (``job_manifests``), for ``describe``.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_manifests",
        sa.Column("job", sa.String(255), sa.ForeignKey("jobs.name", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("document", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_manifests")
