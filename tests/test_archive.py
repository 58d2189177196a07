"""The archive on SQLite: its creation, keys, watermarks, downsampling, a report's round trip,
retention (per cluster; on MariaDB: tests/stack/test_archive_retention_mariadb.py), and the
sacct fallback's parser."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.helpers.reports import sample_report
from tests.test_sync_lookback import Cluster
from webapp.archive.db import ArchiveBusy
from webapp.archive.record import MAX_POINTS, downsample
from webapp.archive.staff_rows import COLUMNS as STAFF_COLUMNS
from webapp.archive.staff_rows import StaffRows
from webapp.archive.store import PRUNED, Archive
from webapp.migrations import ARCHIVE, head, state
from webapp.renderers import text
from webapp.renderers.json import to_dict
from webapp.report.archived import archive_record, from_archive
from webapp.settings import Settings
from webapp.sources.ended import EndedJob, parse_ended
from webapp.sync import run as sync_run
from webapp.sync.options import SyncOptions


@pytest.fixture
def archive(tmp_path):
    with Archive(str(tmp_path / "archive.sqlite")) as a:
        yield a


def test_a_new_archive_is_created_at_the_newest_revision_once(tmp_path):
    path = str(tmp_path / "a.sqlite")
    with Archive(path) as a:
        assert state(ARCHIVE, a.db.conn, "sqlite").revision == head(ARCHIVE)
    with Archive(path) as a:  # reopening applies nothing twice
        assert a.db.query("SELECT version_num FROM alembic_version_archive") == [
            (head(ARCHIVE),)]


def test_put_is_idempotent_by_cluster_job_and_submit_time(archive):
    report = sample_report("4242", n=2000)
    record = archive_record(report)
    assert archive.put(record) is True
    assert archive.put(record) is False
    # the same id submitted again after a controller reset is another job
    again = replace(record, submit_time=record.submit_time + 86400, end_time=record.end_time + 1)
    assert archive.put(again) is True
    assert archive.count("demo") == 2
    assert archive.get("demo", "4242").submit_time == again.submit_time


def test_summaries_are_those_of_the_submissions_asked_for(archive):
    """A page's summaries in one query each 500 ids: the submission asked for (the same
    id twice is two jobs), nothing for a job not archived; the query uses the primary
    key, not a scan of the cluster's rows."""
    record = archive_record(sample_report("4242", n=20))
    again = replace(record, submit_time=record.submit_time + 86400,
                    summary={**record.summary, "job_name": "second"})
    others = [replace(record, job_id=str(5000 + i)) for i in range(600)]
    for r in (record, again, *others):
        archive.put(r)
    keys = [("4242", again.submit_time), ("9999", 1), *((r.job_id, r.submit_time)
                                                         for r in others)]
    seen: list[tuple[str, list]] = []
    query = archive.db.query
    archive.db.query = lambda sql, params=(): seen.append((sql, list(params))) or query(
        sql, params)
    found = archive.summaries("demo", keys)
    archive.db.query = query
    assert len(seen) == 2  # 601 ids: two statements
    for sql, params in seen:  # each a search of the primary key, not a scan
        plan = str(query("EXPLAIN QUERY PLAN " + sql, params))
        assert "cluster=? AND job_id=?" in plan, plan
    assert set(found) == {("4242", again.submit_time), *((r.job_id, r.submit_time)
                                                         for r in others)}
    assert found[("4242", again.submit_time)]["job_name"] == "second"
    assert archive.summaries("demo", [("4242", record.submit_time)])[
        ("4242", record.submit_time)]["job_name"] == record.summary["job_name"]
    assert archive.summaries("other-cluster", keys) == {}


def test_series_are_downsampled_to_max_points_and_keep_their_mean(archive):
    report = sample_report("4242", n=2000)  # 2,000 points at 30 s
    record = archive_record(report)
    for items in record.series.values():
        for s in items:
            assert len(s["points"]) <= MAX_POINTS
    assert record.resolution == 30 * 7  # ceil(59,970 s / 300) = 200 s -> buckets of 7 samples
    full = report.usage.memory_rss[1].mean()
    small = [v for _, v in record.series["memory_rss_bytes"][1]["points"]]
    assert sum(small) / len(small) == pytest.approx(full, rel=1e-6)


def test_downsample_bucket_means():
    assert downsample([[0, 1], [10, 3], [20, 5], [30, 7]], 20) == [[0, 2.0], [20, 6.0]]


def test_report_round_trip_keeps_the_summary(archive):
    report = sample_report("4242")
    archive.put(archive_record(report))
    back = from_archive(archive.get("demo", "4242"))
    want, got = to_dict(report, include_series=False), to_dict(back, include_series=False)
    assert got.pop("gaps")[0]["source"] == "archive"
    want.pop("gaps")
    assert got == want
    assert "from the archive, at 30-second resolution" in text.render(back)


def test_round_trip_keeps_a_findings_evidence_sentence(archive):
    report = sample_report("4243")
    said = replace(report.findings[0], evidence_text="1 GPU allocated, idle for the whole job")
    report = replace(report, job_id="4243", findings=(said, *report.findings[1:]))
    archive.put(archive_record(report))
    back = from_archive(archive.get("demo", "4243"))
    assert back.findings[0].evidence_text == "1 GPU allocated, idle for the whole job"
    assert [f.evidence_text for f in back.findings[1:]] == [None] * (len(back.findings) - 1)


def test_watermark_never_moves_back(archive):
    assert archive.watermark("demo", "archive") is None
    archive.advance("demo", "archive", 200)
    archive.advance("demo", "archive", 100)
    assert archive.watermark("demo", "archive") == 200
    assert archive.watermark("other", "archive") is None


def test_sync_lock_excludes_a_second_holder(tmp_path):
    path = str(tmp_path / "a.sqlite")
    with Archive(path) as one, Archive(path) as two, one.sync_lock("demo"):
        with pytest.raises(ArchiveBusy):
            with two.sync_lock("demo"):
                pass
        with two.sync_lock("other"):  # clusters sync independently
            pass


def test_retention_drops_old_jobs(tmp_path):
    now = 1_800_000_000.0
    with Archive(str(tmp_path / "a.sqlite"), clock=lambda: now) as a:
        old = archive_record(sample_report("1"), 1, int(now - 40 * 86400))
        new = archive_record(sample_report("2"), 2, int(now - 10 * 86400))
        a.put(old), a.put(new)
        assert a.prune("demo", 0) == 0
        assert a.prune("demo", 30) == 1
        assert [j.job_id for j in a.jobs("demo")] == ["2"]
        # the digest's line of each job goes with it
        assert a.db.query("SELECT job_id FROM archive_digest_jobs") == [("2",)]


NOW = 1_800_000_000.0
AGES = (10, 40, 400)  # days since each cluster's three jobs ended
RETENTION = {"demo": 30, "v24": 365}  # days: one archive, two clusters' own settings


def _job_of_every_table(a: Archive, cluster: str, job_id: str, days: int) -> None:
    """One ended job's row in each table retention prunes (``PRUNED``)."""
    end = int(NOW - days * 86400)
    a.put(replace(archive_record(sample_report(job_id), 100, end), cluster=cluster))
    StaffRows(a.db).put([{**dict.fromkeys(STAFF_COLUMNS, 0), "cluster": cluster,
                          "job_id": job_id, "submit_time": 100, "end_time": end, "raw_id": job_id,
                          "user_name": "alice", "account": "a", "partition_name": "p",
                          "state": "COMPLETED", "nodes": "n1"}])
    a.log(cluster, "archive", job_id, 100, end, "archived")
    a.failed(cluster, "email", job_id, 100, end, "smtp down")


def _kept(a: Archive) -> dict[str, dict[str, list[str]]]:
    """table -> cluster -> the job ids it holds."""
    out: dict[str, dict[str, list[str]]] = {}
    for table in PRUNED:
        for cluster, job_id in a.db.query(f"SELECT cluster, job_id FROM {table}"  # noqa: S608
                                          " ORDER BY cluster, job_id"):
            out.setdefault(table, {}).setdefault(cluster, []).append(job_id)
    return out


def check_retention_per_cluster(url: str) -> None:
    """Two clusters share the archive at ``url`` (empty), with retentions of 30 and 365
    days: pruning each by its own drops its old rows from every table and leaves the
    other's, however old."""
    with Archive(url, clock=lambda: NOW) as a:
        for cluster in RETENTION:
            for days in AGES:
                _job_of_every_table(a, cluster, f"{cluster}-{days}", days)
        assert a.prune("demo", RETENTION["demo"]) == 2  # its 40- and 400-day-old jobs
        both = {"demo": ["demo-10"], "v24": ["v24-10", "v24-40", "v24-400"]}
        assert _kept(a) == dict.fromkeys(PRUNED, both)
        assert a.prune("v24", RETENTION["v24"]) == 1
        both = {"demo": ["demo-10"], "v24": ["v24-10", "v24-40"]}
        assert _kept(a) == dict.fromkeys(PRUNED, both)
        assert a.get("v24", "v24-40").summary["job_id"] == "v24-40"  # the report, whole
        assert a.get("v24", "v24-400") is None


def test_each_cluster_keeps_its_own_retention_in_a_shared_archive(tmp_path):
    check_retention_per_cluster(str(tmp_path / "shared.sqlite"))


def test_retention_is_a_per_cluster_setting(tmp_path):
    folder = tmp_path / "clusters"
    folder.mkdir()
    (folder / "v24.conf").write_text("JOBREPORT_ARCHIVE_RETENTION_DAYS=365\n")
    s = Settings.from_env({"JOBREPORT_CONFIG": "", "JOBREPORT_CLUSTERS": "v24,v26",
                           "JOBREPORT_ARCHIVE_RETENTION_DAYS": "30",
                           "JOBREPORT_CLUSTER_SETTINGS_DIR": str(folder)})
    assert [s.for_cluster(c).archive_retention_days for c in s.cluster_names] == [30, 365, 30]


def test_a_sync_prunes_its_own_cluster_only(tmp_path, monkeypatch, fast_pdf):
    monkeypatch.setattr(sync_run, "prefetch", lambda service, jobs: service)
    demo = Cluster(tmp_path, JOBREPORT_ARCHIVE_RETENTION_DAYS="30")  # JOBREPORT_CLUSTER=demo
    try:
        old = archive_record(sample_report("1"), 100, int(demo.now[0] - 40 * 86400))
        for cluster in ("demo", "v24"):
            demo.archive.put(replace(old, cluster=cluster))
        assert demo.run(SyncOptions(direction="archive")).pruned == 1
        assert (demo.archive.count("demo"), demo.archive.count("v24")) == (0, 1)
    finally:
        demo.syncer.close()


def test_parse_ended_filters_orders_and_skips_pending_arrays():
    text = ("125|100|300\n123|100|200\n124_[1-4]|100|Unknown\n126+1|100|250\n"
            "127|100|999\n")
    jobs = parse_ended(text, "demo", 150, 400)
    assert jobs == [EndedJob(200, "123", 100, "demo"), EndedJob(250, "126+1", 100, "demo"),
                    EndedJob(300, "125", 100, "demo")]


def test_a_job_archived_again_gets_its_new_digest_line(tmp_path):
    """``Archive.put`` stores the job's line of the weekly digest beside its record, and
    archiving the job again (``--jobid``) replaces both."""
    with Archive(str(tmp_path / "a.sqlite")) as a:
        first = archive_record(sample_report("7", name="first"), 70, 1_800_000_000)
        assert a.put(first)
        again = replace(first, summary={**first.summary, "job_name": "again"})
        assert a.replace(again)
        assert a.db.query("SELECT job_id, submit_time, job_name FROM archive_digest_jobs") \
            == [("7", 70, "again")]
