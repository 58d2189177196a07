"""Alembic's environment for one target (``webapp.migrations.upgrade`` passes it in the
config's attributes): on the store's own DB-API connection, or offline to print the SQL."""

from __future__ import annotations

from alembic import context

config = context.config
version_table = config.attributes["version_table"]

if context.is_offline_mode():
    context.configure(dialect_name=config.attributes["dialect"], literal_binds=True,
                      version_table=version_table, output_buffer=config.output_buffer)
else:
    context.configure(connection=config.attributes["connection"],
                      version_table=version_table)
with context.begin_transaction():
    context.run_migrations()
