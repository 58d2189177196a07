"""End records that reach slurmdbd out of order: a job whose end lies before the watermark
appears in the accounting view after a later-ending job was processed (slurmdbd down or
behind, slurmctld's agent queue busy). The next run finds it in the look-back window
and archives it once; a run after that does nothing twice. The view is the real
accounting SQL (``AccountingSource``) on rows in SQLite (``tests/helpers/view_sqlite``),
inserted as slurmdbd would have them arrive; the archive is a real SQLite one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.reports import sample_report
from tests.helpers.view_sqlite import SqliteView
from webapp.archive.store import Archive
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource
from webapp.sync import run as sync_run
from webapp.sync.options import SyncOptions
from webapp.sync.run import STAND_IN_WAIT, Syncer

ROWS = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "accounting"
                   / "local-jobs-view-rows.json").read_text())
BUSY = next(r for r in ROWS if r["job_id"] == 1240)
T0 = BUSY["end_time"]
LOOKBACK = 6 * 3600
BOTH = SyncOptions(direction="both", no_deliver=True)


def row(job_id: int, end: int) -> dict:
    """A plain job of the view ending at ``end`` (submitted a minute before)."""
    return {**BUSY, "job_id": job_id, "submit_time": end - 60, "start_time": end - 30,
            "end_time": end}


class Service:
    """The real accounting source over the SQLite view; each report a sample one (its
    sources are the other tests' subject), or slurmdbd's stand-in for ``stand_ins``."""

    def __init__(self, view: SqliteView) -> None:
        self.accounting = AccountingSource("", "demo", connect=lambda: view)
        self.built: list[str] = []
        self.stand_ins: set[str] = set()

    def build(self, job_id: str, archive_fallback: bool = True):  # noqa: ANN201
        self.built.append(job_id)
        report = sample_report(job_id, user="alice")
        if job_id in self.stand_ins:
            from dataclasses import replace

            return replace(report, uid=0, user=None, account=None, job_name="allocation")
        return report


class Cluster:
    """The view (rows added as slurmdbd receives them), the archive and the clock."""

    def __init__(self, tmp_path: Path, lookback: int = LOOKBACK, fresh: bool = False,
                 **env: str) -> None:
        self.view = SqliteView([])
        self.now = [float(T0)]
        self.settings = Settings.from_env({
            "JOBREPORT_CLUSTER": "demo", "JOBREPORT_ARCHIVE_URL": str(tmp_path / "a.sqlite"),
            "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite"),
            "JOBREPORT_SYNC_LOOKBACK": str(lookback), "JOBREPORT_MAIL_MIN_RUNTIME": "0",
            "JOBREPORT_MAIL_TO": "{user}@example.org", "JOBREPORT_MAIL_DAILY_CAP": "0", **env})
        self.archive = Archive(self.settings.archive_url, clock=lambda: self.now[0])
        self.service = Service(self.view)
        self.syncer = Syncer(self.settings, service=self.service,  # type: ignore[arg-type]
                             archive=self.archive)
        for stream in () if fresh else ("archive", "email"):
            self.archive.advance("demo", stream, T0 - 3600)

    def arrive(self, *rows: dict) -> None:
        """End records reaching slurmdbd now."""
        self.view.insert(rows)

    def run(self, opts: SyncOptions = BOTH, after: float = 60):  # noqa: ANN201
        self.now[0] += after
        return self.syncer.run(opts, clock=lambda: self.now[0])

    def archived(self) -> list[tuple[str, int]]:
        return sorted((j, n) for j, n in self.archive.db.query(
            "SELECT job_id, COUNT(*) FROM archive_jobs GROUP BY job_id"))

    def logged(self, stream: str) -> list[str]:
        return sorted(j for j, _, _ in self.archive.outcomes("demo", stream))


@pytest.fixture
def cluster(tmp_path, monkeypatch, fast_pdf):
    # The bulk prefetch reads live sources; this service answers each job itself.
    monkeypatch.setattr(sync_run, "prefetch", lambda service, jobs: service)
    c = Cluster(tmp_path)
    yield c
    c.syncer.close()


def test_a_late_end_record_is_archived_and_emailed_once_by_the_next_run(cluster):
    cluster.arrive(row(2001, T0 + 100), row(2003, T0 + 300))
    cluster.now[0] = T0 + 300
    first = cluster.run()
    assert [j.job_id for j in first.selected] == ["2001", "2003"]
    assert cluster.archive.watermark("demo", "archive") == T0 + 300
    # 2002 ended between them; its end record reaches slurmdbd only now.
    cluster.arrive(row(2002, T0 + 200))
    second = cluster.run()
    assert [j.job_id for j in second.selected] == ["2002"]
    assert second.outcomes["archive"] == {"archived": 1}
    assert sum(second.outcomes["email"].values()) == 1
    assert cluster.archive.watermark("demo", "archive") == T0 + 300  # never back
    third = cluster.run()
    assert third.selected == []
    assert cluster.archived() == [("2001", 1), ("2002", 1), ("2003", 1)]
    for stream in ("archive", "email"):
        assert cluster.logged(stream) == ["2001", "2002", "2003"]
    assert cluster.service.built == ["2001", "2003", "2002"]


def test_without_the_look_back_the_late_job_is_lost(tmp_path, monkeypatch, fast_pdf):
    """What the look-back fixes: 1 s back (the old window) never sees it again."""
    monkeypatch.setattr(sync_run, "prefetch", lambda service, jobs: service)
    c = Cluster(tmp_path, lookback=0)
    try:
        c.arrive(row(2001, T0 + 100), row(2003, T0 + 300))
        c.now[0] = T0 + 300
        c.run()
        c.arrive(row(2002, T0 + 200))
        assert c.run().selected == []
        assert ("2002", 1) not in c.archived()
    finally:
        c.syncer.close()


def test_a_record_later_than_the_look_back_is_not_found(cluster):
    """The window's bound: a job that ended more than the look-back before the watermark
    (slurmdbd down longer) is left to `jobreport sync --jobid`."""
    cluster.arrive(row(2001, T0 + LOOKBACK + 100))
    cluster.now[0] = T0 + LOOKBACK + 100
    cluster.run()
    cluster.arrive(row(2000, T0 + 50))  # 6 h 50 s before the watermark
    assert cluster.run().selected == []


def test_a_new_archive_never_looks_back_before_its_first_run(tmp_path, monkeypatch,
                                                              fast_pdf):
    """A new archive starts ``--max-span`` back; the look-back of the runs after it never
    reaches the accounting before that (hours of a machine's older jobs would otherwise
    come first, at ``--limit`` a run, while the jobs of now waited), but still finds a
    late record after it."""
    monkeypatch.setattr(sync_run, "prefetch", lambda service, jobs: service)
    c = Cluster(tmp_path, fresh=True)
    try:
        c.arrive(row(1900, T0 - 3000), row(2001, T0 + 100), row(2003, T0 + 300))
        c.now[0] = T0 + 300
        first = c.run(SyncOptions(direction="both", no_deliver=True, max_span=600), after=0)
        assert [j.job_id for j in first.selected] == ["2001", "2003"]
        assert c.archive.origin("demo", "archive") == T0 + 300 - 600
        c.arrive(row(2002, T0 + 200))
        assert [j.job_id for j in c.run().selected] == ["2002"]
        assert c.run().selected == []
        assert ("1900", 1) not in c.archived()
        assert c.archive.origin("demo", "email") == T0 - 300  # kept from the first run
    finally:
        c.syncer.close()


def test_the_limit_counts_only_jobs_not_done_in_the_window(cluster):
    """Five done jobs in the window and three late ones: ``--limit 2`` takes the two
    oldest late ones, the next run the third; the view is asked for limit + done rows."""
    cluster.arrive(*(row(2100 + i, T0 + 100 * i) for i in range(1, 6)))
    cluster.now[0] = T0 + 600
    cluster.run()
    cluster.arrive(row(2201, T0 + 150), row(2202, T0 + 250), row(2203, T0 + 350))
    asked: list[int] = []
    ended = cluster.service.accounting.ended_between

    def counted(since: int, until: int, limit: int):  # noqa: ANN202
        asked.append(limit)
        return ended(since, until, limit)

    cluster.service.accounting.ended_between = counted  # type: ignore[method-assign]
    two = SyncOptions(direction="archive", limit=2)
    assert [j.job_id for j in cluster.run(two).selected] == ["2201", "2202"]
    assert asked == [2 + 5]
    assert [j.job_id for j in cluster.run(two).selected] == ["2203"]
    assert cluster.run(two).selected == []
    assert all(n == 1 for _, n in cluster.archived()) and len(cluster.archived()) == 8


def test_the_window_never_reaches_past_the_archives_retention(tmp_path, monkeypatch, fast_pdf):
    """A retention shorter than the look-back: pruned jobs (their log gone) are not
    archived again."""
    monkeypatch.setattr(sync_run, "prefetch", lambda service, jobs: service)
    c = Cluster(tmp_path, JOBREPORT_ARCHIVE_RETENTION_DAYS="0.01")  # 864 s
    try:
        c.arrive(row(2001, T0 + 100), row(2002, T0 + 2000))
        c.now[0] = T0 + 2000
        c.run(SyncOptions(direction="archive"))  # 2001 archived, then pruned (older than 864 s)
        assert c.archived() == [("2002", 1)]
        assert c.run(SyncOptions(direction="archive")).selected == []
    finally:
        c.syncer.close()


def test_a_late_stand_in_waits_from_the_run_that_first_met_it(cluster):
    """A late job read as slurmdbd's stand-in (its start record not there yet) ended long
    ago: the wait for its start record counts from when a run first met it."""
    cluster.arrive(row(2003, T0 + 300))
    cluster.now[0] = T0 + 300
    cluster.run()
    cluster.arrive(row(2002, T0 + 200))
    cluster.service.stand_ins.add("2002")
    stopped = cluster.run(SyncOptions(direction="archive"), after=3600)
    assert stopped.error and "stand-in" in stopped.error
    assert cluster.run(SyncOptions(direction="archive"), after=STAND_IN_WAIT - 61).error
    cluster.service.stand_ins.clear()  # its start record arrived
    done = cluster.run(SyncOptions(direction="archive"))
    assert done.error is None and done.outcomes["archive"] == {"archived": 1}
    assert cluster.archive.db.query("SELECT COUNT(*) FROM sync_stand_ins") == [(0,)]
