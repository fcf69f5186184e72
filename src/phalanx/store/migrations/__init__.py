"""Alembic migrations of the store's schema (run by phalanx.store.migrate, no alembic.ini).

To change the schema, edit ``phalanx/store/tables.py`` and add
``versions/NNNN_what.py`` whose ``down_revision`` is the current head.
"""
