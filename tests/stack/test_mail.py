"""The sync's email of real ended jobs (the real report service, real PDFs) through a real
SMTP server on loopback: an SMTP outage and a killed sync each end with every email that
the policy selects delivered exactly once, to the owner's address."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from email import message_from_bytes
from email.policy import default
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from tests.helpers import stack
from tests.helpers.mail import Recorder, free_port, kill_while_held
from tests.helpers.sync import reach_back
from webapp.mail.policy import skip_reason
from webapp.model import JobId
from webapp.sync.options import SyncOptions
from webapp.sync.run import Syncer, SyncResult

# The command as installed, importing this checkout's code (PYTHONPATH beats the install).
JOBREPORT = str(Path(sys.executable).parent / "jobreport")
MAIL_TO = "{user}@example.org"
MARGIN = timedelta(minutes=1)  # clock rounding; the window needs no more
LONG_POLE = True  # its SMTP outage: first of the last group (tests/conftest.py)
# The policy's shortest run mailed, for both syncs: the stack jobs of 20 s and more pass.
# The window holds every module's jobs ended since the session's batch (~120 in a full
# run, most of them seconds long); at 0 each with a finding was a real PDF, 90 of the
# run's ~1,400 CPU-seconds.
MIN_RUNTIME = 20


@pytest.fixture(scope="module")
def since(stack_jobs, service) -> datetime:
    """A little before the first stack job was submitted: the first sync's window covers
    all of them. (A fixed `2h` would also take in every job other test runs left behind,
    each one a real PDF to render.)"""
    submitted = [service.accounting.job(JobId.parse(j)).submit_time for j in stack_jobs.values()]
    return min(submitted) - MARGIN


@pytest.fixture(scope="module")
def pdf_cache(tmp_path_factory) -> str:
    """One PDF store for the module, as a site's sync processes share one: the second
    test's sync (another process) attaches the PDFs the first one built and kept, rather
    than compiling every job's again (a real PDF each, ~120 jobs in a full run's window)."""
    return str(tmp_path_factory.mktemp("pdf-cache"))


def sync_email(settings, since: datetime) -> SyncResult:  # noqa: ANN001
    """One `jobreport sync --direction email` run in process; run again while it stops
    at a job slurmdbd holds only as a stand-in record so far (another suite's, just
    ended): the next run starts there."""
    for _ in range(20):
        syncer = Syncer(settings)
        try:
            opts = SyncOptions(direction="email", max_span=reach_back(since.timestamp()))
            result = syncer.run(opts)
        finally:
            syncer.close()
        if result.error is None or "stand-in" not in result.error:
            return result
        time.sleep(3)
    raise AssertionError(f"the sync kept stopping: {result.error}")


@pytest.fixture(scope="module")
def stack_policy(stack_jobs, settings, service, since) -> dict[str, bool]:
    """Ended id of each stack job (array tasks one by one) -> whether the sync mails it."""
    mine = [j for j in service.ended_jobs(since)
            if any(j == s or j.startswith(f"{s}_") for s in stack_jobs.values())]
    policy = dataclasses.replace(settings, mail_min_runtime=MIN_RUNTIME)
    chosen = {j: skip_reason(service.build(j), policy, frozenset()) is None for j in mine}
    assert sum(chosen.values()) >= 2, chosen  # the kill test needs a second email to hold
    return chosen


def outbox_rows(path: str) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT job_id, status, to_addr FROM outbox WHERE kind = 'ended'"
                          " ORDER BY id").fetchall()
    finally:
        db.close()


def assert_each_once(recorder: Recorder, outbox: str, stack_policy: dict[str, bool],
                     service) -> None:
    """Every queued email sent and received exactly once; the queue is what the policy
    selects among the stack jobs (other ended jobs in the window may be queued too)."""
    rows = outbox_rows(outbox)
    queued = {job for job, _, _ in rows}
    assert len(queued) == len(rows)
    assert {status for _, status, _ in rows} == {"sent"}
    assert {j for j, chosen in stack_policy.items() if chosen} <= queued
    assert not {j for j, chosen in stack_policy.items() if not chosen} & queued
    assert Counter(recorder.jobs()) == Counter(queued)  # each exactly once, nothing else
    ids = recorder.message_ids()
    assert len(set(ids)) == len(ids)
    for rcpt, raw in recorder.messages:
        msg = message_from_bytes(raw, policy=default)
        owner = service.owner(msg["X-Jobreport-Job"])
        assert rcpt == [msg["To"]] == [f"{owner}@example.org"]
        pdf = next(msg.iter_attachments()).get_content()
        assert pdf.startswith(b"%PDF") and len(pdf) > 10_000  # a real LaTeX PDF


def test_smtp_down_then_up_delivers_each_once(stack_policy, settings, service, since,
                                               pdf_cache, tmp_path):
    port = free_port()  # nothing listens yet: connection refused
    mail = dataclasses.replace(
        settings, smtp_host="127.0.0.1", smtp_port=port, smtp_starttls=False, smtp_user="",
        mail_to=MAIL_TO, mail_map="", mail_opt_out="", mail_min_runtime=MIN_RUNTIME,
        mail_daily_cap=0,
        outbox=str(tmp_path / "outbox.sqlite"), archive_url=str(tmp_path / "archive.sqlite"),
        pdf_cache_dir=pdf_cache)
    result = sync_email(mail, since)
    assert result.error is None and result.delivery == Counter(deferred=1), result
    rows = outbox_rows(mail.outbox)
    assert rows and {status for _, status, _ in rows} == {"pending"}
    recorder = Recorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        db = sqlite3.connect(mail.outbox)
        with db:  # as if the 60 s backoff of the email that met the outage had passed
            db.execute("UPDATE outbox SET next_attempt_at = 0")
        db.close()
        for _ in range(2):  # the second run finds everything queued and sent
            result = sync_email(mail, since)
            assert result.error is None and not result.delivery["deferred"], result
            assert not result.delivery["failed"], result
    finally:
        controller.stop()
    assert_each_once(recorder, mail.outbox, stack_policy, service)


def test_killed_sync_restarted_loses_and_duplicates_nothing(stack_policy, service, since,
                                                            pdf_cache, tmp_path):
    recorder = Recorder()
    recorder.hold_after = 1  # accept the first email, then hold the second in DATA
    controller = Controller(recorder, hostname="127.0.0.1", port=free_port())
    controller.start()
    outbox = str(tmp_path / "outbox.sqlite")
    env = {**os.environ, **stack.load_env(), "PYTHONPATH": str(stack.ROOT),
           "JOBREPORT_SMTP_HOST": "127.0.0.1", "JOBREPORT_SMTP_PORT": str(controller.port),
           "JOBREPORT_OUTBOX": outbox, "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
           "JOBREPORT_MAIL_MIN_RUNTIME": str(MIN_RUNTIME), "JOBREPORT_MAIL_DAILY_CAP": "0",
           "JOBREPORT_MAIL_TO": MAIL_TO, "JOBREPORT_PDF_CACHE_DIR": pdf_cache}
    argv = [JOBREPORT, "sync", "--direction", "email",
            "--max-span", f"{reach_back(since.timestamp())}s"]
    try:
        with open(tmp_path / "killed.log", "wb") as log:
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            kill_while_held(proc, recorder, 120, (tmp_path / "killed.log").read_text)
        recorder.release.set()
        assert len(recorder.messages) == 1
        statuses = Counter(status for _, status, _ in outbox_rows(outbox))
        assert statuses["sent"] == 1 and statuses["sending"] == 1
        assert statuses["pending"] == sum(statuses.values()) - 2
        restarted = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    finally:
        recorder.release.set()
        controller.stop()
    assert_each_once(recorder, outbox, stack_policy, service)


def test_unknown_job_exits_1_naming_it(stack_env, tmp_path):
    env = {**stack.load_env(), "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")}
    done = stack.jobreport("email", "99999999", env=env)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == ["jobreport email: job 99999999 not found"]
