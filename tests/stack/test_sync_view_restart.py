"""The accounting MariaDB going away in the middle of a sync, as a restart looks from the
sync: its connection killed (`KILL CONNECTION`, as root) and new ones refused until the
server is back. Stopping the stack's MariaDB would take slurmdbd and every other test
with it, so the sync reads the view as a user of its own (the restricted user's grants),
which is locked and whose connections are killed after the run's first job, then
unlocked. The run stops cleanly (or reads sacct instead) and the next runs archive every
job exactly once, none missed."""

from __future__ import annotations

import secrets
import time
from collections import Counter

import pytest

from tests.helpers.stack import StackJob, submit, wait_until_done
from tests.helpers.sync import known, root_mysql
from tests.helpers.wait import wait_for
from webapp.archive.store import Archive
from webapp.settings import Settings
from webapp.sync import run as sync_run
from webapp.sync.options import SyncOptions
from webapp.sync.run import Syncer

USER = "jobreport_synctest"
HOSTS = ("localhost", "127.0.0.1")
JOBS = 4
SHORT = StackJob("view-restart", "bob", ("-c1", "--mem=50M", "--time=2"), "sleep 1")


def _root(*statements: str) -> list[tuple]:
    conn = root_mysql()
    try:
        with conn.cursor() as cur:
            rows: list[tuple] = []
            for sql in statements:
                cur.execute(sql)
                rows = list(cur.fetchall())
            return rows
    finally:
        conn.close()


@pytest.fixture(scope="module")
def reader_url() -> str:
    """A reader of the view with the restricted user's grants and nothing more."""
    password = secrets.token_hex(12)
    for host in HOSTS:
        _root(f"CREATE USER IF NOT EXISTS '{USER}'@'{host}'",
              f"ALTER USER '{USER}'@'{host}' IDENTIFIED BY '{password}' ACCOUNT UNLOCK",
              *(f"GRANT SELECT ON jobreport.{t} TO '{USER}'@'{host}'"
                for t in ("jobs", "tres", "node_events")))
    yield f"mysql://{USER}:{password}@127.0.0.1:3306/jobreport"
    for host in HOSTS:
        _root(f"DROP USER IF EXISTS '{USER}'@'{host}'")


def _server_gone() -> None:
    """New connections refused, the ones open killed: the server down, for this reader."""
    for host in HOSTS:
        _root(f"ALTER USER '{USER}'@'{host}' ACCOUNT LOCK")
    for (pid,) in _root("SELECT id FROM information_schema.processlist"  # noqa: S608
                        f" WHERE user = '{USER}'"):
        _root(f"KILL CONNECTION {int(pid)}")


def _server_back() -> None:
    for host in HOSTS:
        _root(f"ALTER USER '{USER}'@'{host}' ACCOUNT UNLOCK")


def test_a_sync_whose_view_goes_away_mid_run_resumes_and_loses_nothing(
        stack_env, reader_url, tmp_path, monkeypatch):
    t0 = int(time.time()) - 2
    ids = {submit(SHORT) for _ in range(JOBS)}
    wait_until_done(sorted(ids))
    env = {**known(stack_env), "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite"), "JOBREPORT_DB_URL": reader_url,
           "JOBREPORT_DB_PASSWORD_FILE": "",
           # the stream starts at t0: no look-back over every other suite's earlier jobs
           "JOBREPORT_SYNC_LOOKBACK": "0"}
    settings = Settings.from_env(env)
    with Archive(settings.archive_url) as archive:
        archive.advance("demo", "archive", t0)
    syncer = Syncer(settings)
    # A batch of one: each job's accounting is read when its turn comes, so the outage
    # lands between two reads of the view (a batch of 1,000 reads them all at once).
    monkeypatch.setattr(sync_run, "BATCH", 1)
    process = syncer._process  # noqa: SLF001
    seen: list[str] = []

    def first_then_outage(job, *args, **kw):  # noqa: ANN001, ANN202
        process(job, *args, **kw)
        seen.append(job.job_id)
        if len(seen) == 1:
            _server_gone()

    opts = SyncOptions(direction="archive")
    try:
        def in_view() -> bool:
            todo = syncer.select(opts, int(time.time()), sync_run.SyncResult())
            return ids <= {j.job_id for j in todo["archive"]}

        wait_for(in_view, 120, "the jobs in the view", every=1)
        monkeypatch.setattr(syncer, "_process", first_then_outage)
        broken = syncer.run(opts)
        _server_back()
        monkeypatch.setattr(syncer, "_process", process)
        # The run stopped at the job it could not read, or read it from sacct.
        assert broken.error is not None or broken.source == "sacct" or \
            broken.outcomes["archive"]["archived"] >= len(ids), broken
        runs = [broken]

        def all_archived() -> bool:
            runs.append(syncer.run(opts))
            with Archive(settings.archive_url) as archive:
                logged = {j for j, _, _ in archive.outcomes("demo", "archive")}
            return ids <= logged

        wait_for(all_archived, 120, lambda: f"every job archived: {runs[-1]}", every=2)
        syncer.run(opts)  # once more: nothing twice
    finally:
        _server_back()
        syncer.close()
    with Archive(settings.archive_url) as archive:
        counts = Counter(j for j, _, _ in archive.outcomes("demo", "archive") if j in ids)
        rows = archive.db.query("SELECT job_id, COUNT(*) FROM archive_jobs GROUP BY job_id")
    assert counts == {j: 1 for j in ids}
    assert {j: n for j, n in rows if j in ids} == {j: 1 for j in ids}
    print(f"mid-run outage: error={broken.error!r} source={broken.source}"
          f" outcomes={dict(broken.outcomes['archive'])}; {len(runs)} runs to finish")
