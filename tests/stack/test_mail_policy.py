"""Emails by policy on the real stack (real jobs, a real SMTP server, SQLite archive):
a clean job sends no email; the signed opt-out link in an email, posted as a mail client's
one-click button does, stops the user's next email; past the daily cap a job is folded
into the weekly digest, whose totals equal the sum over the archived jobs."""

from __future__ import annotations

import re
import time
from email import message_from_bytes
from email.policy import default

import pytest

from tests.helpers.sync import known
from tests.helpers.web import make_client
from webapp.archive.store import Archive
from webapp.mail.digest_queue import send_digests
from webapp.mail.outbox import Outbox
from webapp.mail.sending import smtp_connect
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sync.options import SyncOptions
from webapp.sync.run import Syncer

pytestmark = pytest.mark.stack


@pytest.fixture
def policy_settings(stack_env, tmp_path, smtp):
    _, port = smtp
    env = {**known(stack_env), "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite"),
           "JOBREPORT_SMTP_HOST": "127.0.0.1", "JOBREPORT_SMTP_PORT": str(port),
           "JOBREPORT_MAIL_TO": "{user}@example.org", "JOBREPORT_MAIL_MIN_RUNTIME": "0",
           "JOBREPORT_MAIL_DAILY_CAP": "1", "JOBREPORT_MAIL_OPT_OUT": "",
           "JOBREPORT_PUBLIC_URL": "https://jobs.example.org",
           # A busy loop on a machine other suites share may get well under its core;
           # read it as busy, so one job stays clean (the idle one still reads 0 %).
           "JOBREPORT_THRESHOLDS": ",".join(filter(None, (
               stack_env.get("JOBREPORT_THRESHOLDS"), "cpu_efficiency_low=0.1")))}
    return Settings.from_env(env)


def sync_job(settings: Settings, job_id: str) -> str:
    syncer = Syncer(settings)
    try:
        result = syncer.run(SyncOptions(job_id=job_id))
    finally:
        syncer.close()
    assert result.error is None, result.error
    (outcome,) = result.outcomes["email"]
    return outcome


def received(smtp) -> list:
    return [message_from_bytes(raw, policy=default) for _, raw in smtp[0].messages]


def test_policy_clean_opt_out_cap_and_digest(policy_settings, stack_jobs, smtp):
    settings = policy_settings
    service = ReportService(settings)
    findings = {name: {f.name for f in service.build(jid, archive_fallback=False).findings}
                for name, jid in stack_jobs.items()}
    clean = [n for n, f in findings.items() if not f]
    assert clean, findings
    # A clean job: archived, no email.
    assert sync_job(settings, stack_jobs[clean[0]]) == "skipped: no findings"
    assert received(smtp) == []

    # bob's first job with findings is emailed, with the signed one-click opt-out.
    assert findings["idle"] and findings["mem-over-request"]
    assert sync_job(settings, stack_jobs["idle"]) == "queued"
    (msg,) = received(smtp)
    assert msg["To"] == "bob@example.org"
    (pdf,) = [p for p in msg.iter_attachments() if p.get_content_type() == "application/pdf"]
    assert pdf.get_content().startswith(b"%PDF-")  # the real report, rendered by pdflatex
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    url = re.fullmatch(r"<(https://jobs\.example\.org(/unsubscribe/[^>]+))>",
                       msg["List-Unsubscribe"])
    assert url and url.group(1) in msg.get_body(("plain",)).get_content()
    client = make_client(settings, None)
    assert b"Stop these emails" in client.get(url.group(2)).data  # a GET changes nothing
    assert client.post(url.group(2) + "x").status_code == 404  # a forged token
    page = client.post(url.group(2), data={"List-Unsubscribe": "One-Click"})
    assert page.status_code == 200 and b"gets no more" in page.data
    # ... so bob's next job with findings sends nothing.
    assert sync_job(settings, stack_jobs["mem-over-request"]) == "skipped: user opted out"
    assert len(received(smtp)) == 1

    # alice, daily cap 1: her first job with findings is emailed, the second folded.
    first, second = [n for n in ("two-cpus-one-used", "oom", "busy", "short")
                     if findings[n]][:2]
    assert sync_job(settings, stack_jobs[first]) == "queued"
    assert sync_job(settings, stack_jobs[second]) == "folded into digest"
    assert sync_job(settings, stack_jobs[second]) == "folded into digest"  # decided once
    assert [m["X-Jobreport-Job"] for m in received(smtp)] == [stack_jobs["idle"],
                                                              stack_jobs[first]]

    # The weekly digest (this week): alice's jobs, the folded one marked; bob opted out.
    since, until = int(time.time()) - 6 * 86400, int(time.time()) + 86400
    with Archive(settings.archive_url) as archive:
        archived = [j for j in archive.jobs(settings.cluster, since, until) if j.user == "alice"]
        outbox = Outbox(settings.outbox)
        run = send_digests(settings, archive, outbox, smtp_connect(settings), since, until)
        outbox.close()
    assert run.counts["opted out"] == 1 and run.counts["queued"] == 1
    (digest,) = [m for m in received(smtp) if m["X-Jobreport-Digest"]]
    assert digest["To"] == "alice@example.org" and digest["List-Unsubscribe"]
    text = digest.get_body(("plain",)).get_content()
    synced = {stack_jobs[n] for n in (clean[0], "idle", "mem-over-request", first, second)}
    assert {stack_jobs[first], stack_jobs[second]} <= {j.job_id for j in archived} <= synced
    # Totals recomputed here from the archived summaries, by the documented rule: a job
    # whose figure cannot be computed (no CPU time, no peak: an OOM kill before the first
    # sample) adds nothing.
    cpu = sum(max(0.0, s["cpus"] * s["elapsed_seconds"] - s["cpu_seconds"])
              for s in (j.summary for j in archived)
              if s["cpus"] and s["elapsed_seconds"] and s["cpu_seconds"] is not None) / 3600
    mem = sum(max(0, s["memory_requested_bytes"]
                  - s["memory_peak_bytes"] * max(1, len(s["nodes"])))
              / 2**30 * s["elapsed_seconds"] / 3600
              for s in (j.summary for j in archived)
              if s["memory_requested_bytes"] and s["elapsed_seconds"]
              and s["memory_peak_bytes"] is not None)
    assert f"CPU-hours        {cpu:.2f}" in text
    assert f"Memory GiB-hours {mem:.2f}" in text
    assert "GPU-hours        0.00" in text  # alice's jobs had no GPU
    assert re.search(rf"^{re.escape(stack_jobs[second])} .*\(not emailed: daily limit\)",
                     text, re.M)
    assert "Most common finding" in text
    # The same week again queues nothing twice.
    with Archive(settings.archive_url) as archive:
        outbox = Outbox(settings.outbox)
        again = send_digests(settings, archive, outbox, smtp_connect(settings), since, until)
        outbox.close()
    assert again.counts["already queued"] == 1
