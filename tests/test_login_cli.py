"""Who sees what from a login node (webapp/cli/login.py), on a captured sacct answer:
a caller who cannot read the accounting view gets their own job in full from sacct, and
another user's job without anything from the job's nodes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.test_numbers import sacct_answer
from webapp.cli.login import WITHHELD, WithheldMetrics, service_for
from webapp.model import JobId, JobNotFound
from webapp.settings import Settings
from webapp.sources.sacct_accounting import NoAccounting, SacctAccounting, parse_extra

SUBMIT = 1795434000


@pytest.fixture
def user_settings(monkeypatch) -> Settings:
    def fake_sacct(argv, timeout=30.0):
        if "JobIDRaw,UID,Submit" in argv:
            return f"17|0|{SUBMIT}\n"
        if "--jobs" in argv and argv[argv.index("--jobs") + 1] != "17":
            return ""
        return sacct_answer("local-cancelled-17.psv")

    monkeypatch.setattr("webapp.sources.sacct.run_sacct", fake_sacct)
    # Nothing listens on port 9: Prometheus is down, which only the owner's report asks.
    return Settings(db_readable=False, prometheus_url="http://127.0.0.1:9",
                    prometheus_timeout=1)


def test_own_job_from_sacct_as_the_view_would_give_it(user_settings):
    service, archive = service_for(user_settings, JobId(17), who="root")  # job 17 is root's
    assert isinstance(service.accounting, SacctAccounting) and not archive
    report = service.build(JobId(17), strict_accounting=False, archive_fallback=False)
    assert report.user == "root" and report.uid == 0
    assert report.submit_time == datetime.fromtimestamp(SUBMIT, UTC)
    assert "accounting" not in {g.source for g in report.gaps}
    assert WITHHELD not in {g.reason for g in report.gaps}


def test_another_users_job_is_what_sacct_shows(user_settings):
    service, archive = service_for(user_settings, JobId(17), who="alice")
    assert isinstance(service.accounting, NoAccounting) and not archive
    assert isinstance(service.prometheus, WithheldMetrics)
    report = service.build(JobId(17), strict_accounting=False, archive_fallback=False)
    assert report.user == "root" and report.state == "CANCELLED"
    assert [(g.source, g.reason) for g in report.gaps] == [("prometheus", WITHHELD)]
    assert report.uid is None and report.submit_time is None  # nothing beyond sacct


def test_staff_see_every_job_in_full(user_settings):
    staff = Settings(db_readable=False, prometheus_url="http://127.0.0.1:9",
                     staff=frozenset({"ann"}))
    service, _ = service_for(staff, JobId(17), who="ann")
    assert isinstance(service.accounting, SacctAccounting)


def test_a_job_slurm_does_not_show_is_not_found(user_settings):
    with pytest.raises(JobNotFound):
        service_for(user_settings, JobId(18), who="alice")


def test_parse_extra():
    assert parse_extra("42|1001|1795434160\n43|1002|Unknown\nbad\n") == {
        "42": (1001, datetime.fromtimestamp(1795434160, UTC)),
        "43": (1002, None),
    }
