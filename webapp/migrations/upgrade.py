"""Run a target's revisions with Alembic: on a store's own DB-API connection, or offline to
print the SQL they would run (``jobreport db-upgrade --sql``).

A database made before Alembic is first marked with the revision that stands for its
schema (the archive's ``schema_version`` N is revision 000N; the outbox and the web
state kept no number and are marked nothing: their first revision creates only what is
missing), so the upgrade runs only what it lacks and keeps every row.
"""

from __future__ import annotations

from typing import Any, TextIO

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from webapp.migrations.revision import (
    HERE,
    SchemaOutdated,
    State,
    Target,
    head,
    migrating,
    newer,
    refusal,
    state,
)

DRIVERS = {"sqlite": "sqlite://", "mysql": "mysql+pymysql://"}


def config(target: Target, dialect: str, output: TextIO | None = None) -> Config:
    """Alembic's configuration for ``target``: this package's env.py, the target's
    folder of revisions, its own version table."""
    cfg = Config(output_buffer=output)
    cfg.set_main_option("script_location", HERE)
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", target.versions)
    cfg.attributes.update(version_table=target.version_table, dialect=dialect)
    return cfg


def history(target: Target) -> ScriptDirectory:
    return ScriptDirectory.from_config(config(target, "sqlite"))


def run(target: Target, conn: Any, dialect: str, where: str = "") -> tuple[State, State]:
    """Upgrade the database on ``conn`` (at ``where``) to the head revision, one process
    at a time; where it stood before and after. A later release's database is refused
    (SchemaOutdated)."""
    with migrating(target, conn, dialect):
        before = state(target, conn, dialect)
        if before.revision == head(target):
            return before, before
        if newer(target, before):
            raise SchemaOutdated(refusal(target, where, before))
        # The store's connection itself, so an in-memory database, a lock it holds and its
        # connection settings all apply; Alembic never closes it.
        engine = create_engine(DRIVERS[dialect], creator=lambda: conn, poolclass=StaticPool)
        with engine.connect() as connection:
            cfg = config(target, dialect)
            cfg.attributes["connection"] = connection
            if before.legacy:
                command.stamp(cfg, before.legacy)
            command.upgrade(cfg, "head")
            connection.commit()
        return before, state(target, conn, dialect)


def sql(target: Target, before: State, dialect: str, out: TextIO, where: str = "") -> None:
    """Write to ``out`` the SQL that brings a database standing at ``before`` to the head
    revision (nothing when it is there)."""
    if before.revision == head(target):
        return
    if newer(target, before):
        raise SchemaOutdated(refusal(target, where, before))
    cfg = config(target, dialect, output=out)
    if before.legacy:
        command.stamp(cfg, before.legacy, sql=True)
        command.upgrade(cfg, f"{before.legacy}:head", sql=True)
    elif before.revision is not None:
        command.upgrade(cfg, f"{before.revision}:head", sql=True)
    else:
        command.upgrade(cfg, "head", sql=True)
