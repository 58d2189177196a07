"""Who sees what from a login node (webapp/cli/login.py), on captured sacct answers:
a caller who cannot read the accounting view gets their own job in full from sacct, and
another user's job without anything from the job's nodes; `jobreport jobs` lists the web
list's rows from one sacct call as the caller."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tests.test_numbers import FIX, sacct_answer
from webapp import settings as settings_module
from webapp.cli.jobs import render_jobs
from webapp.cli.login import WITHHELD, WithheldMetrics, build_for_caller, recent_rows, service_for
from webapp.lists.job_list import ListQuery, select
from webapp.model import JobId, JobNotFound
from webapp.report.job_rows import RUNNING_NOTE
from webapp.settings import Caller, Settings, caller_env
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
    return Settings(privileged=False, prometheus_url="http://127.0.0.1:9",
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
    staff = replace(user_settings, staff=frozenset({"ann"}))
    service, archive = service_for(staff, JobId(17), who="ann")  # job 17 is root's
    assert isinstance(service.accounting, SacctAccounting) and not archive
    assert not isinstance(service.prometheus, WithheldMetrics)
    report = service.build(JobId(17), strict_accounting=False, archive_fallback=False)
    # What the view gives the owner: uid and submit time, and Prometheus asked (it is down
    # here, so its gap says that), never the note that usage is withheld.
    assert report.user == "root" and report.uid == 0
    assert report.submit_time == datetime.fromtimestamp(SUBMIT, UTC)
    gaps = {g.source: g.reason for g in report.gaps}
    assert "prometheus" in gaps and gaps["prometheus"] != WITHHELD
    assert "accounting" not in gaps


# -- who is staff, and which sources a caller may read: the system config file's word ----
def _system(tmp_path) -> str:
    conf = tmp_path / "jobreport.conf"
    conf.write_text("JOBREPORT_STAFF=ann\nJOBREPORT_DB_PASSWORD_FILE=/etc/jobreport/db-password\n"
                    "JOBREPORT_CLUSTER=site\n")
    return str(conf)


def test_a_callers_environment_cannot_make_them_staff_or_switch_sources(tmp_path, caplog):
    own = tmp_path / "mine.conf"
    own.write_text("JOBREPORT_STAFF=mallory\nJOBREPORT_SACCT=/tmp/fake-sacct\n")
    env = {"JOBREPORT_STAFF": "mallory", "JOBREPORT_DB_PASSWORD_FILE": "",
           "JOBREPORT_DB_URL": "mysql://jobreport:guess@127.0.0.1/jobreport",
           "JOBREPORT_CLUSTER": "mine"}
    got = caller_env(env, _system(tmp_path), uid=1000)
    assert got["JOBREPORT_STAFF"] == "ann"
    assert got["JOBREPORT_DB_PASSWORD_FILE"] == "/etc/jobreport/db-password"
    assert "JOBREPORT_DB_URL" not in got  # not in the system file: its default
    assert got["JOBREPORT_CLUSTER"] == "mine"  # an unprivileged key: the environment's
    assert "JOBREPORT_STAFF ignored" in caplog.text
    # A config file the caller names grants nothing either.
    got = caller_env({"JOBREPORT_CONFIG": str(own)}, _system(tmp_path), uid=1000)
    assert got["JOBREPORT_STAFF"] == "ann" and "JOBREPORT_SACCT" not in got
    # Root (an administrator testing a setting) may override them; so may the environment
    # of a host without a system config file (a container configured by --env-file).
    assert caller_env(env, _system(tmp_path), uid=0)["JOBREPORT_STAFF"] == "mallory"
    assert caller_env(env, str(tmp_path / "absent.conf"), uid=1000)["JOBREPORT_STAFF"] == \
        "mallory"


def test_jobreport_show_as_mallory_with_staff_in_her_environment(tmp_path, monkeypatch,
                                                                  user_settings):
    monkeypatch.setattr(settings_module, "DEFAULT_CONFIG", _system(tmp_path))
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    monkeypatch.delenv("JOBREPORT_CONFIG", raising=False)
    monkeypatch.setenv("JOBREPORT_STAFF", "mallory")
    monkeypatch.setenv("JOBREPORT_DB_PASSWORD_FILE", "")
    settings = Settings.from_env(caller=Caller(1000, "mallory"))
    assert settings.staff == {"ann"} and settings.db_password_file == "/etc/jobreport/db-password"
    assert not settings.privileged  # neither root nor the service user
    settings = replace(settings, prometheus_url="http://127.0.0.1:9")
    service, _ = service_for(settings, JobId(17), who="mallory")
    assert isinstance(service.prometheus, WithheldMetrics)
    assert isinstance(service.accounting, NoAccounting)


def test_a_password_bob_learned_gives_him_no_other_users_job(user_settings):
    # The URL holds the password (in bob's own environment, on a host without a system
    # config): he is still an ordinary user, so job 17 (root's) comes without its usage,
    # from sacct as him, and the archive is not offered.
    settings = Settings.from_env({"JOBREPORT_DB_URL": "mysql://jobreport:learned@127.0.0.1/x",
                                  "JOBREPORT_PROMETHEUS_URL": "http://127.0.0.1:9"},
                                 caller=Caller(1000, "bob"))
    service, archive = service_for(settings, JobId(17), who="bob")
    assert isinstance(service.prometheus, WithheldMetrics) and not archive
    assert isinstance(service.accounting, NoAccounting)


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
    return Settings(privileged=False, prometheus_url="http://127.0.0.1:9",
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
    staff = Settings(privileged=False, prometheus_url="http://127.0.0.1:9",
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
