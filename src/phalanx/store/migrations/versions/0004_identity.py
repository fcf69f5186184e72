"""Identity: teams, users, API keys (hashes only) and the audit log.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None

_AuditId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("queues", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_table(
        "users",
        sa.Column("name", sa.String(253), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("teams", sa.JSON, nullable=False),
        sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_name", sa.String(253), sa.ForeignKey("users.name"), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("description", sa.String(255), nullable=False, server_default=""),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=True),
        sa.Column("revoked_at", sa.Double, nullable=True),
    )
    op.create_index("ix_api_keys_user_name", "api_keys", ["user_name"])
    op.create_table(
        "audit_log",
        sa.Column("id", _AuditId, primary_key=True, autoincrement=True),
        sa.Column("time", sa.Double, nullable=False),
        sa.Column("user_name", sa.String(253), nullable=False),
        sa.Column("client", sa.String(255), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
    )
    op.create_index("ix_audit_log_time", "audit_log", ["time"])
    op.create_index("ix_audit_log_user_time", "audit_log", ["user_name", "time"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_user_time", table_name="audit_log")
    op.drop_index("ix_audit_log_time", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_api_keys_user_name", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("users")
    op.drop_table("teams")
