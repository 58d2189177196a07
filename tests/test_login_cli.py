"""Who sees what from a login node (webapp/cli/login.py), on captured sacct answers:
a caller who cannot read the accounting view gets their own job in full from sacct, and
another user's job without anything from the job's nodes; `jobreport jobs` lists the web
list's rows from one sacct call as the caller."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.test_numbers import FIX, sacct_answer
from webapp.cli.jobs import render_jobs
from webapp.cli.login import WITHHELD, WithheldMetrics, build_for_caller, recent_rows, service_for
from webapp.model import JobId, JobNotFound
from webapp.report.job_list import RUNNING_NOTE, ListQuery, select
from webapp.settings import Settings
from webapp.sources.sacct import FIELDS
from webapp.sources.sacct_accounting import (
    NAMED_LIST_FIELDS,
    NoAccounting,
    SacctAccounting,
    parse_extra,
)
from webapp.sources.sacct_records import delimiter_of
from webapp.states import NOT_ENDED_STATES as NOT_ENDED

SUBMIT = 1795434000


def as_asked(argv: list[str], text: str) -> str:
    """A "|" capture (no "|" in its names) with the delimiter the call asked sacct for."""
    return text.replace("|", delimiter_of(argv))


@pytest.fixture
def user_settings(monkeypatch) -> Settings:
    def fake_sacct(argv, timeout=30.0):
        if "JobIDRaw,UID,Submit" in argv:
            return as_asked(argv, f"17|0|{SUBMIT}\n")
        if "--jobs" in argv and argv[argv.index("--jobs") + 1] != "17":
            return ""
        return as_asked(argv, sacct_answer("local-cancelled-17.psv"))

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


# -- `jobreport jobs`: the web list's rows, from one sacct call as the caller -----------
LIST = (FIX / "sacct" / "local-user-list-alice.psv").read_text()  # 85 jobs, as alice saw them
SINCE = datetime(2026, 11, 23, 18, 44, 40, tzinfo=UTC)
NOW = datetime.fromtimestamp(1795464308, UTC)


def one_job(job_id: str) -> str:
    """The capture's lines of one job in FIELDS order: what ``sacct --jobs ID`` answers."""
    out = []
    for line in LIST.splitlines():
        parts = line.split("|")
        if len(parts) != len(NAMED_LIST_FIELDS):
            continue  # a job name with a newline broke its line (2653's "a\nb")
        row = dict(zip(NAMED_LIST_FIELDS, parts, strict=True))
        if row["JobID"] == job_id or row["JobID"].startswith(f"{job_id}."):
            out.append("|".join(row.get(f, "") for f in FIELDS))
    return "\n".join(out) + "\n"


@pytest.fixture
def list_settings(monkeypatch) -> tuple[Settings, list[list[str]]]:
    calls: list[list[str]] = []

    def fake_sacct(argv, timeout=30.0):
        calls.append(argv)
        if "JobIDRaw,UID,Submit" in argv:
            return ""  # uid and submit time: not among the figures compared here
        if "--starttime" in argv:
            return as_asked(argv, LIST)
        return as_asked(argv, one_job(argv[argv.index("--jobs") + 1]))

    monkeypatch.setattr("webapp.sources.sacct.run_sacct", fake_sacct)
    return Settings(db_readable=False, prometheus_url="http://127.0.0.1:9",
                    prometheus_timeout=1), calls


def test_the_list_is_one_sacct_call_with_each_reports_figures(list_settings):
    settings, calls = list_settings
    rows, gaps = recent_rows(settings, "alice", "alice", SINCE, NOW)
    assert len(calls) == 1 and calls[0][calls[0].index("--user") + 1] == "alice"
    assert len(rows) == 85 and gaps == []
    assert [r.job_id for r in rows[:2]] == ["2712", "2711"]  # newest submission first
    assert {r.source for r in rows if r.state not in NOT_ENDED} == {"sacct"}
    assert next(r for r in rows if r.job_id == "2699").missing == (RUNNING_NOTE,)
    # One number: each row holds what that job's own report computes from the same sacct.
    for job_id in ("2687", "2689", "2691", "2696_2", "2697", "2652"):
        row = next(r for r in rows if r.job_id == job_id)
        report = build_for_caller(settings, JobId.parse(job_id), sizing=False)
        assert (row.name, row.state, row.elapsed, row.cpus, row.cpu_efficiency,
                row.memory_peak, row.memory_efficiency) == (
            report.job_name, report.state, report.elapsed_seconds, report.cpus,
            report.cpu_efficiency, report.memory_peak_bytes, report.memory_efficiency), job_id
    assert next(r for r in rows if r.job_id == "2687").cpu_efficiency > 0.9  # busy
    gpu = next(r for r in rows if r.job_id == "2652")
    assert gpu.gpus == 1 and gpu.gpu_utilization is None
    assert any(m.startswith("GPU use: ") and WITHHELD not in m for m in gpu.missing)


def test_another_users_list_asks_prometheus_nothing(list_settings):
    settings, _ = list_settings
    rows, _ = recent_rows(settings, "alice", "bob", SINCE, NOW)
    assert f"GPU use: {WITHHELD}" in next(r for r in rows if r.job_id == "2652").missing
    staff = Settings(db_readable=False, prometheus_url="http://127.0.0.1:9",
                     prometheus_timeout=1, staff=frozenset({"ann"}))
    rows, _ = recent_rows(staff, "alice", "ann", SINCE, NOW)
    assert f"GPU use: {WITHHELD}" not in next(r for r in rows if r.job_id == "2652").missing


def test_the_table_fits_80_columns_and_says_why_a_figure_is_blank(list_settings):
    settings, _ = list_settings
    rows, gaps = recent_rows(settings, "alice", "alice", SINCE, NOW)
    rows = select(rows, ListQuery())
    lines = render_jobs("alice", 7, rows, gaps, 20)
    assert lines[0] == "Jobs of alice in the last 7 days: 85, the 20 most recent (--limit)"
    assert lines[1].split() == ["job", "name", "state", "elapsed", "CPU", "eff", "mem", "eff",
                                "GPU", "use", "findings"]
    assert [line.split()[0] for line in lines[2:22]] == [r.job_id for r in rows[:20]]
    assert lines[2] == ("2712         sizing-1795+ PENDING          -       -       -  no GPU"
                        "        -")  # not ended: the report has the live figures
    assert "Figures from: accounting 11, sacct 9 (sacct's memory peak is seff's estimate)." \
        in lines
    every = render_jobs("alice", 7, rows, gaps, 100)
    assert all(len(line) <= 80 for line in lines + every), max(lines + every, key=len)
    assert any(line.startswith("2691         oom          OUT_OF_ME+ ") for line in every)
    assert any(line.startswith("2652         watch-idle-+ CANCELLED      43s ")
               and line.endswith("    1x -        -") for line in every)
    notes = " ".join(" ".join(every).split())  # wrapped lines joined again
    assert "Blank: GPU use: cannot reach http://127.0.0.1:9: ConnectionError: 2652, 2597, " \
        "2586." in notes
    assert lines[-1].startswith("Details: jobreport show JOBID")
