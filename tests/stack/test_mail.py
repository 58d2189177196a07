"""Batch email of real ended jobs (the real report service, real PDFs) through a real SMTP
server on loopback: an SMTP outage and a killed batch each end with every email that the
policy selects delivered exactly once, to the owner's address."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.policy import default

import pytest
from aiosmtpd.controller import Controller

from tests.helpers import stack
from tests.helpers.mail import Recorder, email_args, free_port, kill_while_held
from webapp.cli.mail import run_email
from webapp.mail.policy import skip_reason
from webapp.model import JobId

JOBREPORT = str(stack.ROOT / ".venv" / "bin" / "jobreport")
MAIL_TO = "{user}@example.org"
MARGIN = timedelta(minutes=1)  # clock rounding; the window needs no more


@pytest.fixture(scope="module")
def since(stack_jobs, service) -> datetime:
    """A little before the first stack job was submitted: the batch window covers all of
    them. (A fixed `2h` would also take in every job other test runs left behind, each
    one a real PDF to render.)"""
    submitted = [service.accounting.job(JobId.parse(j)).submit_time for j in stack_jobs.values()]
    return min(submitted) - MARGIN


def ended_since(since: datetime) -> str:
    """The --ended-since argument reaching back to ``since`` from now."""
    return f"{int((datetime.now(UTC) - since).total_seconds()) + 1}s"


@pytest.fixture(scope="module")
def stack_policy(stack_jobs, settings, service, since) -> dict[str, bool]:
    """Ended id of each stack job (array tasks one by one) -> whether the batch mails it."""
    mine = [j for j in service.ended_jobs(since)
            if any(j == s or j.startswith(f"{s}_") for s in stack_jobs.values())]
    policy = dataclasses.replace(settings, mail_min_runtime=0)
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
                                               tmp_path, capsys):
    port = free_port()  # nothing listens yet: connection refused
    mail = dataclasses.replace(
        settings, smtp_host="127.0.0.1", smtp_port=port, smtp_starttls=False, smtp_user="",
        mail_to=MAIL_TO, mail_map="", mail_opt_out="", mail_min_runtime=0,
        outbox=str(tmp_path / "outbox.sqlite"))
    assert run_email(email_args("--ended-since", ended_since(since)), mail, service) == 0
    out = capsys.readouterr().out
    assert " 0 sent, 1 deferred, 0 failed" in out, out
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
            assert run_email(email_args("--ended-since", ended_since(since)), mail,
                             service) == 0
        out = capsys.readouterr().out
        assert all(" 0 deferred, 0 failed" in line for line in out.splitlines()), out
    finally:
        controller.stop()
    assert_each_once(recorder, mail.outbox, stack_policy, service)


def test_killed_batch_restarted_loses_and_duplicates_nothing(stack_policy, service, since,
                                                             tmp_path):
    recorder = Recorder()
    recorder.hold_after = 1  # accept the first email, then hold the second in DATA
    controller = Controller(recorder, hostname="127.0.0.1", port=free_port())
    controller.start()
    outbox = str(tmp_path / "outbox.sqlite")
    env = {**os.environ, **stack.load_env(), "JOBREPORT_SMTP_HOST": "127.0.0.1",
           "JOBREPORT_SMTP_PORT": str(controller.port), "JOBREPORT_OUTBOX": outbox,
           "JOBREPORT_MAIL_MIN_RUNTIME": "0", "JOBREPORT_MAIL_TO": MAIL_TO}
    try:
        with open(tmp_path / "killed.log", "wb") as log:
            proc = subprocess.Popen([JOBREPORT, "email", "--ended-since", ended_since(since)],
                                    env=env, stdout=log, stderr=subprocess.STDOUT)
            kill_while_held(proc, recorder, 120, (tmp_path / "killed.log").read_text)
        recorder.release.set()
        assert len(recorder.messages) == 1
        statuses = Counter(status for _, status, _ in outbox_rows(outbox))
        assert statuses["sent"] == 1 and statuses["sending"] == 1
        assert statuses["pending"] == sum(statuses.values()) - 2
        restarted = subprocess.run(
            [JOBREPORT, "email", "--ended-since", ended_since(since)], env=env,
            capture_output=True, text=True, timeout=120)
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
