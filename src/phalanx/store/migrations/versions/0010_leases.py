"""Leases: which replica of the control plane leads, and under which term.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("holder", sa.String(253), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("term", sa.BigInteger, nullable=False),
        sa.Column("renewed_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leases")
