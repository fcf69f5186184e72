"""Secrets: teams' and users' values, encrypted by the control plane.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("owner", sa.String(320), primary_key=True),
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("keys", sa.JSON, nullable=False),
        sa.Column("ciphertext", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("created_by", sa.String(253), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("secrets")
