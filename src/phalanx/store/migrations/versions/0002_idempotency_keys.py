"""Idempotency keys: the answer of each submit that carried one.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("jobs", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
