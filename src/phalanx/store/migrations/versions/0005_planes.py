"""Compute planes that dial in: their registry, and API key scopes that name a plane.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "planes",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("cordoned", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("draining", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("last_seen", sa.Double, nullable=True),
    )
    # "plane:<name>" is longer than "all" or "read".
    with op.batch_alter_table("api_keys") as batch:
        batch.alter_column("scope", type_=sa.String(64), existing_type=sa.String(16),
                           existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.alter_column("scope", type_=sa.String(16), existing_type=sa.String(64),
                           existing_nullable=False)
    op.drop_table("planes")
