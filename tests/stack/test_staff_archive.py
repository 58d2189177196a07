"""The staff report from the archive on the stack: the window's jobs recorded from the
real sacct and Prometheus, then summed and ranked by the database, give the tables the
in-memory report gives over the same window."""

from __future__ import annotations

import math
import time

import pytest

from webapp.archive.staff_rows import StaffRows, Window
from webapp.archive.store import Archive
from webapp.settings import Settings
from webapp.staff.service import record_window, staff_report

pytestmark = pytest.mark.stack
DAYS = 1.0


def test_archive_path_equals_the_in_memory_report(stack_env, tmp_path):
    env = {**stack_env, "JOBREPORT_OUTBOX": str(tmp_path / "outbox"),
           "JOBREPORT_STAFF_REPORT": "rows=100000",
           "JOBREPORT_THRESHOLDS": ",".join(filter(None, (
               stack_env.get("JOBREPORT_THRESHOLDS"), "min_core_hours=0,min_gpu_hours=0"))),
           "JOBREPORT_ARCHIVE_URL": f"sqlite:///{tmp_path}/archive.sqlite"}
    settings = Settings.from_env(env)
    until = float(int(time.time()) - 60)  # every job that ended by then is in slurmdbd
    since = until - DAYS * 86400
    recorded = record_window(settings, since, until)
    assert recorded > 0, "the stack ran no job in the last day"
    assert record_window(settings, since, until) == recorded  # again: nothing doubled
    with Archive(settings.archive_url) as a:
        assert StaffRows(a.db).count(Window(settings.cluster, since, until)) == recorded

    live = staff_report(settings, days=DAYS, until=until, from_archive=False)
    stored = staff_report(settings, days=DAYS, until=until, from_archive=True)
    assert stored.jobs == live.jobs == recorded
    assert any(t.rows for t in live.tables if t.key != "repeat_offenders")
    for a, b in zip(live.tables, stored.tables, strict=True):
        assert [r.cells[0] for r in a.rows] == [r.cells[0] for r in b.rows], a.key
        for ra, rb in zip(a.rows, b.rows, strict=True):
            for k, v in ra.values.items():
                w = rb.values[k]
                assert (math.isclose(v, w, rel_tol=1e-9) if isinstance(v, float) and
                        isinstance(w, float) else v == w), (a.key, k, v, w)


def test_mariadb_archive_ranks_and_pages_as_sqlite_does(stack_env, tmp_path):
    """The same generated jobs in a MariaDB archive of its own (a fresh database, never
    the accounting tables) and in SQLite: the same tables and the same pages."""
    from datetime import UTC, datetime

    from tests.helpers import scale_archive
    from tests.helpers.sync import create_mariadb_archive, drop_mariadb_archive
    from webapp.lists.job_list import ListQuery
    from webapp.lists.job_page import archive_page
    from webapp.staff.archived import build_staff_report_sql, staff_row
    from webapp.thresholds import StaffConfig, Thresholds

    until = 1_800_000_000
    jobs = list(scale_archive.staff_jobs(3000, 40, until=until, heavy=300))
    cfg = StaffConfig(rows=15, large_memory_partitions=("debug",))
    t = Thresholds(large_memory_need_gib=1.0, smaller_gpu_util=0.5, cpu_efficiency_low=0.9)
    now = datetime.fromtimestamp(until, UTC)
    url = create_mariadb_archive("jobreport_scale_test")
    try:
        results = []
        for archive_url in (url, f"sqlite:///{tmp_path}/archive.sqlite"):
            with Archive(archive_url) as a:
                rows = StaffRows(a.db)
                with a.db.transaction():
                    rows.put(staff_row("bench", j) for j in jobs)
                report = build_staff_report_sql(rows, "bench", until - 7 * 86400, until, cfg,
                                                t, {})
                pages = [archive_page(a, ["bench"], "user0000", ListQuery(sort=s), now,
                                      page=2, per_page=40)
                         for s in ("submit", "cpu_waste", "mem_waste", "cpu_eff")]
                results.append((report, pages))
        (maria, maria_pages), (lite, lite_pages) = results
        assert maria.jobs == lite.jobs == 3000
        for a_, b in zip(maria.tables, lite.tables, strict=True):
            assert [r.cells[0:2] for r in a_.rows] == [r.cells[0:2] for r in b.rows], a_.key
            for ra, rb in zip(a_.rows, b.rows, strict=True):
                for k, v in ra.values.items():
                    w = rb.values[k]
                    assert type(v) is type(w), (a_.key, k, v, w)  # JSON-ready alike
                    assert (math.isclose(v, w, rel_tol=1e-9)
                            if isinstance(w, float) else v == w), (a_.key, k, v, w)
        assert [[r.job_id for r in p[0]] for p in maria_pages] == \
            [[r.job_id for r in p[0]] for p in lite_pages]
        assert all(p[1] == 300 for p in maria_pages)
    finally:
        drop_mariadb_archive("jobreport_scale_test")


def test_mariadb_archive_gives_the_digests_sqlite_gives(stack_env, tmp_path):
    """The weekly digest's queries on a MariaDB archive of its own (each job's stored line,
    the quoted findings extracted by the database, and the lines written from the records
    for jobs archived without one, the summary's figures and the GPUs' use extracted as
    JSON): the same digests, GPU waste, findings and energy included, as on SQLite and as
    from the full records."""
    from collections import Counter

    from tests.helpers import scale_archive
    from tests.helpers.sync import create_mariadb_archive, drop_mariadb_archive
    from tests.test_scale_digest import rounded
    from webapp.archive.week_sums import build_digest
    from webapp.mail.digest_queue import digests

    until = 1_800_000_000
    url = create_mariadb_archive("jobreport_digest_test")
    try:
        got = {}
        for name, archive_url in (("maria", url),
                                  ("lite", f"sqlite:///{tmp_path}/archive.sqlite")):
            scale_archive.fill_reports(archive_url, 400, 12, progress=False, until=until,
                                       heavy=60)
            settings = Settings.from_env({"JOBREPORT_CLUSTER": scale_archive.CLUSTER,
                                          "JOBREPORT_ARCHIVE_URL": archive_url,
                                          "JOBREPORT_OUTBOX": str(tmp_path / "o.sqlite")})
            with Archive(archive_url) as a:
                # a third of the jobs as if archived before their line was stored
                a.db.execute("DELETE FROM archive_digest_jobs WHERE job_id > ?", ("5000266",))
                skipped = Counter()
                got[name] = list(digests(settings, a, until - 7 * 86400, until + 1,
                                         skipped=skipped))
                assert a.db.query("SELECT COUNT(*) FROM archive_digest_jobs")[0][0] == 400
                full = [build_digest(scale_archive.CLUSTER, d.user, d.since, d.until,
                                     a.jobs(scale_archive.CLUSTER, d.since, until, d.user))
                        for d in got[name]]
            assert not skipped and len(got[name]) == 12
            assert rounded(got[name]) == rounded(full), name
        assert rounded(got["maria"]) == rounded(got["lite"])
        heavy = next(d for d in got["maria"] if d.user == "user0000")
        assert len(heavy.jobs) >= 60 and heavy.top_finding and heavy.top_message
        assert sum(d.gpu_hours for d in got["maria"]) > 0
        assert sum(d.energy_kwh or 0 for d in got["maria"]) > 0
        assert any(j.job_name for d in got["maria"] for j in d.jobs)
    finally:
        drop_mariadb_archive("jobreport_digest_test")
