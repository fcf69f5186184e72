"""What a plane's worker fence needs, kept across control-plane restarts.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("planes", sa.Column("fence_needs", sa.Double, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("planes") as batch:
        batch.drop_column("fence_needs")
