"""Which accounting record the sync reads for a job: the one its key (job id, submit time)
names, in bulk as one by one, and not slurmdbd's stand-in for a job that just ended."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from tests.helpers.reports import sample_report
from tests.helpers.view_rows import BUSY, ROWS, ViewConnection
from webapp.archive.store import Archive
from webapp.model import SourceUnavailable
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource, is_stand_in, pick_record
from webapp.sources.ended import EndedJob
from webapp.sync.options import SyncOptions
from webapp.sync.run import STAND_IN_WAIT, Syncer, SyncResult

# Rows of the stack's `jobreport.jobs` view (busy 1240, idle 1241, array 1249 tasks 4 and 1):
# tests/helpers/view_rows.py.
# DERIVED: id 1240 given to another job a day later, after a controller reset.
REUSED = {**BUSY, "uid": 1002, "user": "bob", "account": "teaching", "job_name": "later",
          "submit_time": BUSY["submit_time"] + 86400, "start_time": BUSY["start_time"] + 86400,
          "end_time": BUSY["end_time"] + 86400}
# DERIVED: what slurmdbd writes when a job's end reaches it before the job's start record
# (as_mysql_job.c): no name, no uid, no account, no request, "None assigned".
STAND_IN = {**BUSY, "uid": 0, "user": None, "account": None, "job_name": "allocation",
            "cpus": 0, "mem_req": 0, "timelimit": 0, "nodelist": "None assigned",
            "tres_req": None}


def source(rows: list[dict]) -> AccountingSource:
    return AccountingSource("mysql://unused", "demo", connect=lambda: ViewConnection(rows))


def test_bulk_reads_the_record_the_sync_key_names_not_a_later_job_with_that_id():
    src = source([REUSED, *ROWS])
    keys = {"1240": BUSY["submit_time"], "1249_1": BUSY["submit_time"]}
    got = src.jobs(["1240", "1249_1", "1241"], submitted=keys)
    assert (got["1240"].job_name, got["1240"].user, got["1240"].uid) == ("busy", "alice", 1001)
    assert got["1240"].end_time.timestamp() == BUSY["end_time"]
    assert got["1249_1"].job_id == "1249_1" and got["1249_1"].job == 1252
    assert got["1241"].job_name == "idle"  # no key given: its (only) record
    # Without the key, as `job()` reads an id: the latest record.
    assert src.jobs(["1240"])["1240"].job_name == "later"


def test_pick_record_by_submit_time_else_the_latest():
    assert pick_record([BUSY, REUSED], BUSY["submit_time"]) is BUSY
    assert pick_record([BUSY, REUSED]) is REUSED
    assert pick_record([BUSY, REUSED], 12345) is REUSED  # an unknown key: as job()
    assert pick_record([]) is None


def test_stand_in_record_is_recognised():
    stand_in = source([STAND_IN]).jobs(["1240"])["1240"]
    assert is_stand_in(stand_in.uid, stand_in.account, stand_in.job_name, stand_in.partition)
    # A report joined with sacct's placeholder: an account, but no partition.
    assert is_stand_in(0, "teaching", "allocation", None)
    busy = source([BUSY]).jobs(["1240"])["1240"]
    assert not is_stand_in(busy.uid, busy.account, busy.job_name, busy.partition)
    assert not is_stand_in(0, "root", "allocation", "debug")  # root's own job of that name


class StandInService:
    """Builds the stand-in's report: what the sources give while slurmdbd has only it."""

    def build(self, job_id: str, archive_fallback: bool = True):  # noqa: ANN201
        report = sample_report(job_id)
        return replace(report, uid=0, user=None, account=None, job_name="allocation")


def test_sync_waits_for_the_full_record_then_archives_what_there_is(tmp_path):
    settings = Settings.from_env({"JOBREPORT_CLUSTER": "demo",
                                  "JOBREPORT_ARCHIVE_URL": str(tmp_path / "a.sqlite"),
                                  "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")})
    now = [float(BUSY["end_time"] + 5)]
    archive = Archive(settings.archive_url, clock=lambda: now[0])
    syncer = Syncer(settings, service=StandInService(), archive=archive)  # type: ignore[arg-type]
    job = EndedJob(BUSY["end_time"], "1240", BUSY["submit_time"], "demo")
    result = SyncResult(outcomes={"archive": Counter()})
    try:
        with pytest.raises(SourceUnavailable, match="stand-in"):
            syncer._process(job, ["archive"], SyncOptions(), None, frozenset(), result)
        assert archive.watermark("demo", "archive") is None  # tried again next run
        assert archive.get("demo", "1240") is None
        # its start record never came: the wait counts from the run that first met it
        now[0] = BUSY["end_time"] + 5 + STAND_IN_WAIT
        syncer._process(job, ["archive"], SyncOptions(), None, frozenset(), result)
        assert archive.get("demo", "1240").summary["job_name"] == "allocation"
        assert archive.watermark("demo", "archive") == BUSY["end_time"]
    finally:
        syncer.close()
