"""`jobreport sync` on the real stack: 50 real jobs ending while `sync --limit 7` runs
every few seconds and is killed twice; each archived and emailed once, none missed, the
watermark never past an unprocessed job; a MariaDB archive gives the same summaries."""

from __future__ import annotations

import time
from collections import Counter
from email import message_from_bytes
from email.policy import default

import pymysql
import pytest
from aiosmtpd.controller import Controller

from tests.helpers.mail import Recorder, free_port
from tests.helpers.sync import (
    all_done,
    create_mariadb_archive,
    drop_mariadb_archive,
    mail_env,
    run_sync,
    start_watermarks,
    submit_short_jobs,
)
from tests.helpers.wait import wait_for
from webapp.archive.store import Archive
from webapp.mail.outbox import Outbox
from webapp.sources.accounting import connect_from_url

PLAIN = 47  # + 3 array tasks = 50 jobs


def our_jobs(db_url: str, since: int) -> dict[str, tuple[int, int]]:
    """job id -> (submit, end) of this test's ended jobs, from the accounting view."""
    conn = connect_from_url(db_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT job_id, array_job_id, array_task_id, het_job_id, het_job_offset,"
                        " submit_time, end_time FROM jobs WHERE cluster = 'demo' AND"
                        " submit_time >= %s AND job_name LIKE 'sync-%%' AND end_time > 0"
                        " AND (array_task_id IS NOT NULL OR array_job_id = 0"
                        " OR array_job_id IS NULL)", (since,))
            rows = cur.fetchall()
    finally:
        conn.close()
    out = {}
    for r in rows:
        if r["array_task_id"] is not None and r["array_job_id"]:
            jid = f"{r['array_job_id']}_{r['array_task_id']}"
        elif r["het_job_offset"] is not None and r["het_job_id"]:
            jid = f"{r['het_job_id']}+{r['het_job_offset']}"
        else:
            jid = str(r["job_id"])
        out[jid] = (int(r["submit_time"]), int(r["end_time"]))
    return out


@pytest.fixture(scope="module")
def synced(stack_env, tmp_path_factory):
    """50 jobs synced into a SQLite archive by killed and repeated runs; what was seen."""
    tmp = tmp_path_factory.mktemp("sync")
    recorder = Recorder()
    smtp = Controller(recorder, hostname="127.0.0.1", port=free_port())
    smtp.start()
    env = mail_env(stack_env, tmp, smtp.port)
    t0 = int(time.time())
    start_watermarks(env, t0)
    ids = submit_short_jobs(PLAIN)
    count = {"runs": 0, "kills": 0, "busy": 0}
    violations: list = []
    jobs: dict = {}
    try:
        def one_run() -> bool:
            done = all_done(ids)
            # Two runs die mid-way: from the second run that finds a few of these jobs to
            # process (one with nothing to do ends before a kill could land), until two
            # kills have landed.
            with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
                archived = {j for j, _, _ in archive.outcomes("demo", "archive")}
            count["busy"] += len(set(our_jobs(stack_env["JOBREPORT_DB_URL"], t0))
                                 - archived) >= 3
            killed = count["busy"] >= 2 and count["kills"] < 2
            status = run_sync(env, "--limit", "7", kill_after=1.5 if killed else None)
            count["runs"] += 1
            count["kills"] += status is None
            jobs.clear()
            jobs.update(our_jobs(stack_env["JOBREPORT_DB_URL"], t0))
            finished = False
            with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
                for stream in ("archive", "email"):
                    mark = archive.watermark("demo", stream)
                    logged = {j for j, _, _ in archive.outcomes("demo", stream)}
                    violations.extend((stream, j, end, mark) for j, (_, end) in jobs.items()
                                      if end < mark and j not in logged)
                    if done and status == 0 and stream == "email":
                        finished = len(logged & set(jobs)) == len(jobs) == 50
            return done and status == 0 and finished

        # other jobs may hold the node for a while
        wait_for(one_run, 900, lambda: f"every job synced ({count['runs']} runs)", every=2)
        yield {"env": env, "jobs": jobs, "runs": count["runs"], "kills": count["kills"],
               "t0": t0, "violations": violations, "recorder": recorder}
    finally:
        smtp.stop()
        subprocess_cancel(ids)


def subprocess_cancel(ids: list[str]) -> None:
    import subprocess

    subprocess.run(["scancel", *ids], check=False, capture_output=True)


def test_each_job_archived_once_none_missed(synced):
    jobs = synced["jobs"]
    assert synced["kills"] == 2
    assert len(jobs) == 50
    # array tasks are archived as what they are
    assert sum("_" in j for j in jobs) == 3
    with Archive(synced["env"]["JOBREPORT_ARCHIVE_URL"]) as archive:
        rows = archive.db.query("SELECT job_id, submit_time, count(*) FROM archive_jobs"
                                " GROUP BY job_id, submit_time")
        archived = {(j, s): n for j, s, n in rows}
        for job_id, (submit, _) in jobs.items():
            assert archived.get((job_id, submit)) == 1, job_id
            summary = archive.get("demo", job_id, submit).summary
            assert summary["job_id"] == job_id and summary["end_time"]
        outcomes = Counter(j for j, _, _ in archive.outcomes("demo", "archive") if j in jobs)
        assert set(outcomes.values()) == {1}


def test_watermark_never_passed_an_unprocessed_job(synced):
    assert synced["violations"] == []
    with Archive(synced["env"]["JOBREPORT_ARCHIVE_URL"]) as archive:
        mark = archive.watermark("demo", "archive")
    assert mark >= max(end for _, end in synced["jobs"].values())
    assert mark <= int(time.time())  # the last processed job's end, never beyond now


def test_each_eligible_email_sent_once(synced):
    jobs = synced["jobs"]
    with Archive(synced["env"]["JOBREPORT_ARCHIVE_URL"]) as archive:
        outcomes = {j: o for j, _, o in archive.outcomes("demo", "email") if j in jobs}
    queued = {j for j, o in outcomes.items() if o in ("queued", "already queued")}
    assert queued, f"no email was eligible: {Counter(outcomes.values())}"
    outbox = Outbox(synced["env"]["JOBREPORT_OUTBOX"])
    try:
        rows = {r.job_id: r for r in outbox.rows(("pending", "sending", "sent", "failed"))}
    finally:
        outbox.close()
    assert queued <= set(rows)
    assert all(rows[j].status == "sent" for j in queued)
    received = Counter(message_from_bytes(raw, policy=default)["X-Jobreport-Job"]
                       for _, raw in synced["recorder"].messages)
    assert {j: received[j] for j in queued} == dict.fromkeys(queued, 1)
    skipped = set(outcomes) - queued
    assert not skipped & set(received)


def test_mariadb_and_sqlite_archives_hold_the_same_summaries(synced):
    name = "jobreport_archive_test"
    url = create_mariadb_archive(name)
    try:
        env = {**synced["env"], "JOBREPORT_ARCHIVE_URL": url}
        with Archive(url) as archive:
            assert archive.db.dialect.name == "mysql"
            archive.advance("demo", "archive", synced["t0"])
        assert run_sync(env, "--direction", "archive", "--limit", "500") == 0
        with Archive(url) as maria, Archive(synced["env"]["JOBREPORT_ARCHIVE_URL"]) as lite:
            for job_id, (submit, _) in synced["jobs"].items():
                a, b = maria.get("demo", job_id, submit), lite.get("demo", job_id, submit)
                assert a is not None, job_id
                # The queue context compares a job with the partition's recent history,
                # which grows between the two runs; everything else must be identical.
                assert {**a.summary, "queue": None} == {**b.summary, "queue": None}, job_id
                assert a.series == b.series and a.resolution == b.resolution
        # the user owns its database only
        conn = pymysql.connect(unix_socket="/run/mysqld/mysqld.sock", user=name,
                               password=url.split(":")[2].split("@")[0])
        with conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError):
            cur.execute("SELECT count(*) FROM slurm_acct_db.demo_job_table")
        conn.close()
    finally:
        drop_mariadb_archive(name)
