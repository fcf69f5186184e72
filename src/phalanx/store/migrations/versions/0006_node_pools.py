"""Node pools bought for pending gangs.

Revision ID: 0006
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_pools",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("job", sa.String(255), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("flavor", sa.String(63), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("node_count", sa.Integer, nullable=False),
        sa.Column("price_per_node_hour", sa.Double, nullable=False),
        sa.Column("tries", sa.Integer, nullable=False),
        sa.Column("blocked_until", sa.Double, nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.Column("released_at", sa.Double, nullable=True),
        sa.Column("checks", sa.Integer, nullable=False),
        sa.Column("error_kind", sa.String(32), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
    )
    op.create_index("ix_node_pools_job", "node_pools", ["job", "attempt"])
    op.create_index("ix_node_pools_state", "node_pools", ["state"])


def downgrade() -> None:
    op.drop_index("ix_node_pools_state", table_name="node_pools")
    op.drop_index("ix_node_pools_job", table_name="node_pools")
    op.drop_table("node_pools")
