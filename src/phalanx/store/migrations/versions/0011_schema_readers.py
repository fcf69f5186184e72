"""The oldest version of Phalanx that may run on this schema (rolling upgrades).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels = None
depends_on = None
# Only adds: a version at 0010 could run on this schema (it would not know to, though:
# reading ``schema_info`` starts with this revision). See phalanx.store.migrate.
expand_only = True


def upgrade() -> None:
    op.create_table(
        "schema_info",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("value", sa.String(255), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("schema_info")
