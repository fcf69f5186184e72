"""Alembic environment: migrates over the connection that phalanx.store.migrate hands in.

The caller owns the transaction (and, on PostgreSQL, the advisory lock that keeps two
processes from migrating at once), so this file only points Alembic at the schema.
"""

from __future__ import annotations

from alembic import context

from phalanx.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("phalanx.store.migrate runs these migrations over an open connection")

context.configure(
    connection=connection,
    target_metadata=metadata,
    # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
