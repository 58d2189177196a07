"""The staff report from the archive on the stack: the window's jobs recorded from the
real sacct and Prometheus, then summed and ranked by the database, give the tables the
in-memory report gives over the same window."""

from __future__ import annotations

import math
import time

import pytest

from webapp.archive.staff_rows import StaffRows, Window
from webapp.archive.store import Archive
from webapp.report.staff_service import record_window, staff_report
from webapp.settings import Settings

pytestmark = pytest.mark.stack
DAYS = 1.0


def test_archive_path_equals_the_in_memory_report(stack_env, tmp_path):
    env = {**stack_env, "JOBREPORT_OUTBOX": str(tmp_path / "outbox"),
           "JOBREPORT_STAFF_REPORT": "rows=100000,min_core_hours=0,min_gpu_hours=0",
           "JOBREPORT_ARCHIVE_URL": f"sqlite:///{tmp_path}/archive.sqlite"}
    settings = Settings.from_env(env)
    until = float(int(time.time()) - 60)  # every job that ended by then is in slurmdbd
    since = until - DAYS * 86400
    recorded = record_window(settings, since, until)
    assert recorded > 0, "the stack ran no job in the last day"
    assert record_window(settings, since, until) == recorded  # again: nothing doubled
    with Archive(settings.archive_url) as a:
        assert StaffRows(a.db).count(Window(settings.cluster, since, until)) == recorded

    live = staff_report(settings, days=DAYS, until=until)
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
