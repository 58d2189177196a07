"""The accounting view's QoS column (mgmt/03_job_view_branch.sql): a row's ``qos`` read into
the job's record, and a view created before the column (the package upgraded, `jobreport
db-setup` not run again) still serving reports, without the QoS, and saying what to run."""

from __future__ import annotations

import logging

import pymysql
import pytest

from tests.helpers.view_rows import BUSY, ViewConnection
from webapp.model import SourceUnavailable
from webapp.sources.accounting import (
    COLUMNS,
    OLD_VIEW_COLUMNS,
    VIEW_RECHECK_SECONDS,
    AccountingSource,
    no_qos_column,
    parse_row,
)

# BUSY: a row of the stack's `jobreport.jobs` view, captured before it had the qos column
# (tests/helpers/view_rows.py): what an older view answers to its columns.
# DERIVED: the same row as the view answers it now, the job run under a QoS named "long".
WITH_QOS = {**BUSY, "qos": "long"}
TRES = {1001: "gres/gpu"}
# What MariaDB answers a SELECT naming a column the view lacks (ER_BAD_FIELD_ERROR).
UNKNOWN_QOS = pymysql.err.OperationalError(1054, "Unknown column 'qos' in 'field list'")


def test_the_view_reads_the_qos_last():
    assert COLUMNS.endswith(", qos") and OLD_VIEW_COLUMNS + ", qos" == COLUMNS


def test_a_row_gives_the_jobs_qos_by_name():
    job = parse_row(WITH_QOS, TRES)
    assert (job.job_id, job.partition, job.qos) == ("1240", "debug", "long")
    assert parse_row({**BUSY, "qos": None}, TRES).qos is None  # id_qos 0: none
    assert parse_row(BUSY, TRES).qos is None  # a row of the older view
    assert parse_row(BUSY, TRES) == parse_row({**BUSY, "qos": None}, TRES)


class OldView(ViewConnection):
    """A pymysql connection to a view without the qos column: a SELECT naming it fails as
    MariaDB fails it; any other answers ``rows``. Every statement is kept."""

    def __init__(self, rows: list[dict], has_qos: bool = False) -> None:
        super().__init__(rows)
        self.has_qos = has_qos
        self.statements: list[str] = []

    def execute(self, sql: str, params: object) -> None:
        self.statements.append(sql)
        if "FROM jobs" in sql and ", qos" in sql and not self.has_qos:
            raise UNKNOWN_QOS
        super().execute(sql, params)


def test_an_older_view_still_serves_reports_and_says_what_to_run(caplog):
    view, now = OldView([BUSY]), [1000.0]
    src = AccountingSource("mysql://unused", "demo", connect=lambda: view,
                           clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "webapp.sources.accounting"):
        job = src.job("1240")
    assert (job.job_name, job.user, job.qos) == ("busy", "alice", None)
    (line,) = [r.getMessage() for r in caplog.records]
    assert "predates this release" in line and "run `jobreport db-setup`" in line
    assert "cluster demo" in line
    # Asked once with the column, then without it; the next queries know already.
    jobs = [s for s in view.statements if "FROM jobs" in s]
    assert [COLUMNS in s for s in jobs] == [True, False]
    caplog.clear()
    assert [j.job_id for j in src.running()] == ["1240"]
    assert src.jobs(["1240"])["1240"].qos is None
    assert not caplog.records and not any(COLUMNS in s for s in view.statements[3:])
    # A while later it is asked again: db-setup may have been run meanwhile.
    view.has_qos, view.rows = True, [WITH_QOS]
    now[0] += VIEW_RECHECK_SECONDS
    assert src.job("1240").qos == "long"
    assert COLUMNS in view.statements[-1]


def test_other_errors_stay_an_unavailable_source():
    assert no_qos_column(UNKNOWN_QOS)
    other = pymysql.err.OperationalError(1054, "Unknown column 'user' in 'field list'")
    assert not no_qos_column(other)
    assert not no_qos_column(pymysql.err.OperationalError(1142, "SELECT command denied"))

    class Refusing(OldView):
        def execute(self, sql: str, params: object) -> None:
            raise other

    src = AccountingSource("mysql://unused", "demo", connect=lambda: Refusing([BUSY]))
    with pytest.raises(SourceUnavailable, match="query failed"):
        src.job("1240")
