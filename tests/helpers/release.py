"""The last release before Alembic, from this checkout's git history: its code makes
databases (``release_databases``) that the upgrade tests then bring up to date."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from webapp.migrations import connect

ROOT = Path(__file__).resolve().parents[2]
# The last commit whose code wrote the schemas by hand (the archive's numbered migrations
# 1-5 and schema_version; the outbox's and the web state's CREATE TABLE IF NOT EXISTS).
RELEASE = "cc57d8db474f7e9592bd14d9dbb2c5c39edd353f"
BUILDER = Path(__file__).with_name("release_databases.py")
VERSION_TABLES = ("alembic_version_archive", "alembic_version_outbox",
                  "alembic_version_web_state")


def release_tree(dest: Path) -> Path:
    """The release's packages unpacked under ``dest`` (once)."""
    if (dest / "webapp").is_dir():
        return dest
    done = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(ROOT), "archive",
                           # the shared package's name then
                           "--format=tar", RELEASE, "webapp", "jobreport_net", "mgmt"],
                          capture_output=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"the upgrade tests run the release before Alembic ({RELEASE[:12]}) from"
                    f" git history, which this checkout lacks (a shallow clone? `git fetch"
                    f" --unshallow`): {done.stderr.decode(errors='replace').strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    # Extraction filters came with Python 3.11.4; 3.12 warns without one.
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        tar.extractall(dest, **safe)  # noqa: S202 (this repository's own history)
    return dest


def build(tree: Path, archive_url: str, outbox: str, web_state: str) -> None:
    """Run the release's code in ``tree`` to make the three databases with rows."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    env.update(PYTHONPATH=str(tree), JOBREPORT_CONFIG="")
    proc = subprocess.run([sys.executable, str(BUILDER), archive_url, outbox, web_state],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(str(tree)), f"not the release's code: {proc.stdout}"


def rows(where: str) -> dict[str, list[tuple]]:
    """Every row of every table (but Alembic's version tables), in a stable order."""
    conn, dialect = connect(where, create=False)
    try:
        cur = conn.cursor()
        if dialect == "sqlite":
            cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            cur.execute("SHOW TABLES")
        tables = sorted(r[0] for r in cur.fetchall() if r[0] not in VERSION_TABLES)
        out = {}
        for table in tables:
            quoted = f'"{table}"' if dialect == "sqlite" else f"`{table}`"
            cur.execute(f"SELECT * FROM {quoted}")  # noqa: S608 (names from the catalogue)
            out[table] = sorted((tuple(r) for r in cur.fetchall()), key=repr)
        return out
    finally:
        conn.close()


def schema(where: str) -> dict[str, Any]:
    """Per table (but the version tables and the release's schema_version): columns (name,
    type, nullable, default), primary key, indexes and unique constraints, as SQLAlchemy
    reads them back."""
    import sqlalchemy as sa
    from sqlalchemy.pool import StaticPool

    conn, dialect = connect(where, create=False)
    engine = sa.create_engine("sqlite://" if dialect == "sqlite" else "mysql+pymysql://",
                              creator=lambda: conn, poolclass=StaticPool)
    try:
        inspector = sa.inspect(engine)
        out: dict[str, Any] = {}
        for table in inspector.get_table_names():
            if table in (*VERSION_TABLES, "schema_version"):
                continue
            pk = inspector.get_pk_constraint(table)["constrained_columns"]
            out[table] = {
                # SQLite lets a TEXT PRIMARY KEY column hold NULL unless it says NOT NULL;
                # the release's said nothing there, the revisions do: the key is the key.
                "columns": [(c["name"], str(c["type"]),
                             c["nullable"] and not (dialect == "sqlite" and c["name"] in pk),
                             c.get("default")) for c in inspector.get_columns(table)],
                "primary_key": pk,
                "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                                  for i in inspector.get_indexes(table)),
                "unique": sorted(tuple(u["column_names"])
                                 for u in inspector.get_unique_constraints(table)),
            }
        return out
    finally:
        engine.dispose()
