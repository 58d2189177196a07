"""`jobreport db-upgrade` on the stack's MariaDB: an archive the release before Alembic
made there (its own code) upgraded in place with every row, alike a new one; the outbox's
and the web state's revisions run there too. SQLite: tests/test_db_upgrade.py."""

from __future__ import annotations

import pytest

from tests.helpers.release import build, release_tree, rows, schema
from tests.helpers.sync import create_mariadb_archive, drop_mariadb_archive
from webapp.archive.store import Archive
from webapp.cli import main
from webapp.migrations import ARCHIVE, OUTBOX, WEB_STATE, SchemaOutdated, connect, head, state
from webapp.migrations import upgrade as migrations


@pytest.fixture
def database():
    """A new MariaDB database of its own (and a user owning only it): its URL."""
    made: list[str] = []

    def make(name: str) -> str:
        made.append(name)
        return create_mariadb_archive(name)

    yield make
    for name in made:
        drop_mariadb_archive(name)


def test_a_mariadb_archive_the_release_made_upgrades_in_place(stack_env, database, tmp_path,
                                                              monkeypatch, capsys):
    url = database("jobreport_upgrade_release")
    env = {"JOBREPORT_ARCHIVE_URL": url, "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite"),
           "JOBREPORT_WEB_STATE": str(tmp_path / "web-state.sqlite")}
    build(release_tree(tmp_path / "release"), *env.values())
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = rows(url)
    assert len(before["archive_jobs"]) == 40 and before["mail_opt_out"]
    assert ("demo", "zoë", 1_700_000_000.5, "staff:root") in before["mail_opt_out"]

    with pytest.raises(SchemaOutdated, match="run `jobreport db-upgrade`"):
        Archive(url)
    assert main(["db-upgrade", "--sql"]) == 0
    printed = capsys.readouterr().out
    assert "made before Alembic (as revision 0005)" in printed
    assert "INSERT INTO alembic_version_archive (version_num) VALUES ('0005')" in printed
    assert rows(url) == before  # --sql changed nothing

    assert main(["db-upgrade"]) == 0
    assert "now at revision" in capsys.readouterr().out
    after = rows(url)
    # later revisions' tables (the digest's lines; the sync's last runs and stand-ins),
    # new and empty
    for table in ("archive_digest_jobs", "sync_runs", "sync_stand_ins"):
        assert after.pop(table) == [], table
    # the watermarks gain where each stream began: the oldest end its sync log holds (0010)
    oldest: dict[tuple[str, str], int] = {}
    for r in before["sync_log"]:
        oldest[(r[0], r[1])] = min(oldest.get((r[0], r[1]), r[4]), r[4])
    marks = after["sync_watermarks"]
    assert marks and all(r[-1] == oldest.get((r[0], r[1])) for r in marks)
    after["sync_watermarks"] = [r[:-1] for r in marks]
    # the staff rows gain the memory used and the efficiency node by node (0011), empty
    staff = after["archive_staff_jobs"]
    assert staff and all(tuple(r[-2:]) == (None, None) for r in staff)
    after["archive_staff_jobs"] = [r[:-2] for r in staff]
    assert after == before
    fresh = database("jobreport_upgrade_fresh")
    Archive(fresh).close()  # a new, empty database: made at the head
    assert schema(url) == schema(fresh)
    with Archive(url) as archive:
        assert archive.get("demo", "1003").user == "名前"
        assert archive.get("demo", "1001").summary["job_name"] == "run-1 ✓"


@pytest.mark.parametrize("target", (ARCHIVE, OUTBOX, WEB_STATE), ids=lambda t: t.name)
def test_every_revision_runs_on_mariadb_up_and_down(stack_env, database, target):
    from alembic import command
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    conn, dialect = connect(database("jobreport_revisions"))
    assert dialect == "mysql" and state(target, conn, dialect).empty
    assert migrations.run(target, conn, dialect)[1].revision == head(target)
    if target is OUTBOX:  # a message with its PDFs: LONGBLOB, not BLOB's 64 KiB
        cur = conn.cursor()
        cur.execute("INSERT INTO outbox (`key`, job_id, kind, from_addr, to_addr, message_id,"
                    " message, next_attempt_at, created_at) VALUES"
                    " ('1:report', '1', 'report', 'a', 'b', '<1@x>', %s, 0, 0)",
                    (b"\x00\xff" * 2**20,))
        cur.execute("SELECT length(message), status, attempts FROM outbox")
        assert cur.fetchall() == ((2**21, "pending", 0),)
    engine = create_engine("mysql+pymysql://", creator=lambda: conn, poolclass=StaticPool)
    with engine.connect() as connection:
        cfg = migrations.config(target, dialect)
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, "base")
    cur = conn.cursor()
    cur.execute("SHOW TABLES")
    assert [r[0] for r in cur.fetchall()] == [target.version_table]
    assert migrations.run(target, conn, dialect)[1].revision == head(target)
    conn.close()
