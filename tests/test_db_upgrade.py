"""`jobreport db-upgrade` on SQLite: the revisions of the archive, the outbox and the web
state; databases the release before Alembic made (its own code, from git) upgraded in
place with every row; the sync, the web app and every store refusing an older schema.
MariaDB: tests/stack/test_db_upgrade_mariadb.py."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.release import build, release_tree, rows, schema
from webapp.archive.store import Archive
from webapp.cli import main
from webapp.mail.outbox import Outbox
from webapp.migrations import (
    ARCHIVE,
    OUTBOX,
    TARGETS,
    WEB_STATE,
    SchemaOutdated,
    check,
    connect,
    head,
    state,
)
from webapp.migrations import upgrade as migrations
from webapp.settings import Settings
from webapp.watch_records import AlertLog
from webapp.web.state import WebState

ROOT = Path(__file__).resolve().parent.parent
REFUSED = re.compile(r"this jobreport needs revision \d{4}: run `jobreport db-upgrade`")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return release_tree(tmp_path_factory.mktemp("release"))


def where(tmp_path: Path) -> dict[str, str]:
    return {"JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
            "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite"),
            "JOBREPORT_WEB_STATE": str(tmp_path / "web-state.sqlite")}


@pytest.fixture
def released(tree, tmp_path, monkeypatch) -> dict[str, str]:
    """The three databases as the release before Alembic left them, with rows; the
    environment that names them."""
    env = where(tmp_path / "release")
    build(tree, *env.values())
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def db_upgrade(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["db-upgrade", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_each_database_is_one_line_of_revisions_numbered_as_its_files(target):
    """NNNN_what.py holds revision NNNN, which follows NNNN - 1: the head the stores check
    (read from the file names, without Alembic) is Alembic's."""
    scripts = migrations.history(target)
    assert scripts.get_heads() == [head(target)]
    files = sorted(f for f in os.listdir(target.versions) if f.endswith(".py"))
    chain = list(reversed(list(scripts.walk_revisions())))
    assert [s.revision for s in chain] == [f[:4] for f in files]
    assert [s.revision for s in chain] == [f"{n:04d}" for n in range(1, len(files) + 1)]
    assert [s.down_revision for s in chain] == [None, *(s.revision for s in chain[:-1])]
    assert all(s.module.__doc__ for s in chain)  # each says what it changes, and why


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_a_new_database_is_created_at_the_head_and_each_downgrade_undoes_its_revision(
        target, tmp_path):
    from alembic import command
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    conn, dialect = connect(str(tmp_path / "new.sqlite"))
    assert state(target, conn, dialect).empty
    before, after = migrations.run(target, conn, dialect)
    assert before.empty and after.revision == head(target)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert set(target.tables) - {"schema_version"} <= tables
    engine = create_engine("sqlite://", creator=lambda: conn, poolclass=StaticPool)
    with engine.connect() as connection:
        cfg = migrations.config(target, dialect)
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, "base")
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} \
        == {target.version_table}
    assert migrations.run(target, conn, dialect)[1].revision == head(target)


def test_the_releases_databases_upgrade_in_place_with_every_row(released, tmp_path, capsys):
    before = {name: rows(path) for name, path in released.items()}
    assert all(before.values()) and all(all(t) for t in before.values())  # rows everywhere
    assert before["JOBREPORT_ARCHIVE_URL"]["schema_version"] == [(1,), (2,), (3,), (4,), (5,)]

    rc, out, err = db_upgrade(capsys)
    assert rc == 0, err
    assert f"made before Alembic (as revision 0005); now at revision {head(ARCHIVE)}" in out
    assert f"the outbox ({released['JOBREPORT_OUTBOX']}): made before Alembic; now at" in out
    after = {name: rows(path) for name, path in released.items()}
    # Every row kept; the tables of the revisions after the release (the digest's lines,
    # written the first time a digest covers a job; the sync's last runs and stand-ins)
    # are new and empty.
    added = after["JOBREPORT_ARCHIVE_URL"].keys() - before["JOBREPORT_ARCHIVE_URL"].keys()
    assert added == {"archive_digest_jobs", "sync_runs", "sync_stand_ins"}
    assert all(after["JOBREPORT_ARCHIVE_URL"].pop(t) == [] for t in added)
    # The outbox's rows gain a last column, empty: when their last error happened (0002).
    outbox_rows = after["JOBREPORT_OUTBOX"]["outbox"]
    assert all(r[-1] is None for r in outbox_rows)
    after["JOBREPORT_OUTBOX"]["outbox"] = [r[:-1] for r in outbox_rows]
    # The watermarks gain where each stream began: the oldest end its sync log holds (0010).
    marks = after["JOBREPORT_ARCHIVE_URL"]["sync_watermarks"]
    oldest = {}
    for r in before["JOBREPORT_ARCHIVE_URL"]["sync_log"]:
        key = (r[0], r[1])
        oldest[key] = min(oldest.get(key, r[4]), r[4])
    assert marks and all(r[-1] == oldest.get((r[0], r[1])) for r in marks)
    after["JOBREPORT_ARCHIVE_URL"]["sync_watermarks"] = [r[:-1] for r in marks]
    # The staff rows gain the memory each job used and its efficiency, node by node (0011),
    # empty: they are read as before, the busiest node's peak x nodes.
    staff = after["JOBREPORT_ARCHIVE_URL"]["archive_staff_jobs"]
    assert staff and all(r[-2:] == (None, None) for r in staff)
    after["JOBREPORT_ARCHIVE_URL"]["archive_staff_jobs"] = [r[:-2] for r in staff]
    assert after == before

    # As a database the revisions made: tables, columns, keys and indexes.
    fresh = where(tmp_path / "fresh")
    for target, name in ((ARCHIVE, "JOBREPORT_ARCHIVE_URL"), (OUTBOX, "JOBREPORT_OUTBOX"),
                         (WEB_STATE, "JOBREPORT_WEB_STATE")):
        conn, dialect = connect(fresh[name])
        migrations.run(target, conn, dialect)
        conn.close()
        assert schema(released[name]) == schema(fresh[name]), target.name

    # Today's stores read what the release wrote.
    with Archive(released["JOBREPORT_ARCHIVE_URL"]) as archive:
        assert archive.get("demo", "1001").summary["job_name"] == "run-1 ✓"
        assert archive.count("demo") == 40
        assert archive.watermark("demo", "email") == 1_700_000_600
    outbox = Outbox(released["JOBREPORT_OUTBOX"])
    assert b"Dear zo" in outbox.get("1002:report").message
    outbox.close()
    alerts = AlertLog(released["JOBREPORT_OUTBOX"])
    assert [a.user for a in alerts.alerts(0)] == ["alice", "名前"]
    alerts.close()
    assert WebState(released["JOBREPORT_WEB_STATE"]).session_ended("session-two")

    rc, out, _ = db_upgrade(capsys)  # twice: nothing to do
    assert rc == 0 and out.count("the newest: nothing to do") == 3


def test_an_older_schema_stops_the_stores_the_sync_and_the_web_app(released, capsys):
    before = {name: rows(path) for name, path in released.items()}
    for open_store, name in ((Archive, "JOBREPORT_ARCHIVE_URL"), (Outbox, "JOBREPORT_OUTBOX"),
                             (AlertLog, "JOBREPORT_OUTBOX"), (WebState, "JOBREPORT_WEB_STATE")):
        with pytest.raises(SchemaOutdated, match=REFUSED):
            open_store(released[name])

    assert main(["sync", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert "made before Alembic" in err and REFUSED.search(err), err

    from webapp.web.app import create_app

    settings = Settings.from_env({**released, "JOBREPORT_SECRET_KEY": "k" * 32})
    with pytest.raises(SchemaOutdated, match=REFUSED):
        create_app(settings)
    assert {name: rows(path) for name, path in released.items()} == before  # untouched


def test_a_refused_start_of_the_web_app_names_the_command(released):
    """gunicorn's worker fails to boot with the reason in its log."""
    env = {**os.environ, **released, "JOBREPORT_SECRET_KEY": "k" * 32}
    proc = subprocess.run([sys.executable, "-c", "import webapp; webapp.create_app()"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and REFUSED.search(proc.stderr), proc.stderr


def test_sql_prints_what_an_upgrade_would_run_and_changes_nothing(released, tmp_path,
                                                                   monkeypatch, capsys):
    missing = tmp_path / "none" / "web-state.sqlite"
    monkeypatch.setenv("JOBREPORT_WEB_STATE", str(missing))
    before = {name: rows(released[name]) for name in ("JOBREPORT_ARCHIVE_URL",
                                                      "JOBREPORT_OUTBOX")}
    rc, out, err = db_upgrade(capsys, "--sql")
    assert rc == 0, err
    assert "-- the archive (" in out and "made before Alembic (as revision 0005)" in out
    assert "CREATE TABLE alembic_version_archive" in out
    assert "INSERT INTO alembic_version_archive (version_num) VALUES ('0005')" in out
    assert "CREATE TABLE IF NOT EXISTS outbox" in out
    assert f"-- the web app's state ({missing}): not there yet" in out
    assert "CREATE TABLE IF NOT EXISTS ended_sessions" in out
    assert not missing.exists() and not missing.parent.exists()
    assert {name: rows(released[name]) for name in before} == before
    conn = sqlite3.connect(released["JOBREPORT_ARCHIVE_URL"])
    assert state(ARCHIVE, conn, "sqlite").legacy == "0005"  # still unmarked
    conn.close()


def test_a_later_releases_database_is_refused_not_downgraded(tmp_path, monkeypatch, capsys):
    path = str(tmp_path / "archive.sqlite")
    Archive(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE alembic_version_archive SET version_num = '9001'")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaOutdated, match="made by a later jobreport"):
        Archive(path)
    monkeypatch.setenv("JOBREPORT_ARCHIVE_URL", path)
    for name, value in where(tmp_path).items():
        if name != "JOBREPORT_ARCHIVE_URL":
            monkeypatch.setenv(name, value)
    rc, _, err = db_upgrade(capsys)
    assert rc == 1 and "at revision 9001, made by a later jobreport" in err


def test_two_processes_opening_a_new_archive_at_once_create_it_once(tmp_path):
    path = tmp_path / "archive.sqlite"
    code = "import sys; from webapp.archive.store import Archive; Archive(sys.argv[1]).close()"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version_num FROM alembic_version_archive").fetchall() == [
        (head(ARCHIVE),)]


def test_opening_a_store_at_the_head_loads_no_alembic(tmp_path):
    """The check on open is two plain queries: `jobreport` commands stay quick."""
    path = str(tmp_path / "archive.sqlite")
    Archive(path).close()
    code = ("import sys; from webapp.archive.store import Archive; Archive(sys.argv[1]).close();"
            " print(sorted(m for m in sys.modules if m.split('.')[0] in"
            " ('alembic', 'sqlalchemy')))")
    proc = subprocess.run([sys.executable, "-c", code, path], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_the_start_check_waits_for_a_database_another_process_is_creating(tmp_path):
    """A second gunicorn worker's start check, while the first creates the web state: the
    file holds tables but no revision yet. The check waits for the creation lock and looks
    again instead of refusing the file as outdated."""
    path = tmp_path / "web-state.sqlite"
    creator = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        "from jobreport_common.sqlite_file import setting_up\n"
        f"with setting_up({str(path)!r}):\n"
        f"    db = sqlite3.connect({str(path)!r})\n"
        "    db.execute('CREATE TABLE ended_sessions (sid, until)'); db.commit()\n"
        "    print('holding', flush=True); time.sleep(1.5)\n"
        "    db.execute('DROP TABLE ended_sessions'); db.commit(); db.close()\n")],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True)
    try:
        assert creator.stdout is not None and creator.stdout.readline().strip() == "holding"
        started = time.monotonic()
        check(WEB_STATE, str(path))  # no SchemaOutdated: it waited, then found it empty
        assert time.monotonic() - started > 0.5
    finally:
        creator.wait(10)
    assert creator.returncode == 0
