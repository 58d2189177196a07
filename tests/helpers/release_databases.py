"""Databases made by the last release before Alembic, with rows in every table.

Run as a script with that release's code first on the path (``release.build``): it uses
only that release's own classes, so the schema is the one its code wrote by hand, and
the rows are the ones it wrote.

    python release_databases.py ARCHIVE_URL OUTBOX_PATH WEB_STATE_PATH
"""

from __future__ import annotations

import sys
from email.message import EmailMessage

JOBS = 40  # archived jobs; every other table gets a few rows
T0 = 1_700_000_000  # 2023-11-14 22:13:20 UTC
NAMES = ("alice", "bob", "zoë", "名前")  # utf8mb4 on MariaDB: non-ASCII names survive


def staff_row(i: int, user: str) -> dict:
    return {"cluster": "demo", "job_id": str(1000 + i), "submit_time": T0 + i,
            "end_time": T0 + 600 + i, "raw_id": str(1000 + i), "user_name": user,
            "account": "physics", "partition_name": "cpu", "state": "COMPLETED",
            "submit": T0 + i + 0.5, "start_time": T0 + 10.0 + i, "end_at": T0 + 600.0 + i,
            "elapsed": 590.0, "time_limit": 3600.0, "cpus": 4, "node_count": 1,
            "nodes": "node1", "memory_requested": 4 * 2**30 + i, "gpus": i % 2,
            "cpu_seconds": 1000.25 + i, "memory_peak": 2**30 + i,
            "gpu_utilization": 0.5 if i % 2 else None, "gpu_memory_used": None,
            "gpu_memory_total": None, "node_cpu": '{"node1": 0.42}',
            "pending_reasons": "Priority", "energy_joules": 1.5e6 + i}


def build_archive(url: str) -> None:
    from webapp.archive.mail_state import MailState
    from webapp.archive.staff_rows import StaffRows

    # the release's own API: its store exported ArchivedJob
    from webapp.archive.store import Archive, ArchivedJob

    with Archive(url, clock=lambda: T0 + 0.25) as archive:
        for i in range(JOBS):
            user = NAMES[i % len(NAMES)]
            archive.put(ArchivedJob(
                "demo", str(1000 + i), T0 + i, T0 + 600 + i, user, "COMPLETED", 30.0,
                {"job_name": f"run-{i} ✓", "cpus": 4, "findings": [{"id": "idle_cpus"}]},
                {"cpu": [[T0 + 30 * k, k / 10] for k in range(20)]}, T0 + 700.125 + i))
            archive.log("demo", "archive", str(1000 + i), T0 + i, T0 + 600 + i, "archived")
        archive.log("demo", "email", "1000", T0, T0 + 600, "queued")
        archive.advance("demo", "archive", T0 + 600 + JOBS - 1)
        archive.advance("demo", "email", T0 + 600)
        archive.failed("demo", "archive", "999", T0 - 1, T0 + 599, "pdflatex failed: ä")
        mail = MailState(archive.db, clock=lambda: T0 + 0.5)
        mail.opt_out("demo", "bob", "link")
        mail.opt_out("demo", "zoë", "staff:root")
        mail.decide("demo", "1000", T0, "alice", "2023-11-14", "report")
        mail.decide("demo", "1004", T0 + 4, "alice", "2023-11-14", "digest")
        StaffRows(archive.db).put(staff_row(i, NAMES[i % len(NAMES)]) for i in range(JOBS))


def build_outbox(path: str) -> None:
    # the release's own module path (webapp.watch_records now)
    from webapp.archive.alerts import AlertLog, Cancellation

    from webapp.mail.outbox import Outbox

    outbox = Outbox(path, clock=lambda: T0 + 1.5)
    for i, user in enumerate(NAMES):
        msg = EmailMessage()
        msg["From"], msg["To"] = "jobreport@example.org", f"{user}@example.org"
        msg["Subject"], msg["Message-ID"] = f"Job {1000 + i}", f"<{1000 + i}@example.org>"
        msg.set_content(f"Dear {user}, your job ended.")
        msg.add_attachment(bytes(range(256)) * 64, maintype="application", subtype="pdf",
                           filename="report.pdf")
        outbox.enqueue(f"{1000 + i}:report", str(1000 + i), "report", msg)
    outbox.enqueue_notice("1000:chat", "1000", "alice", b'{"text": "job 1000 ended"}')
    row = outbox.claim_next()
    outbox.mark_sent(row)
    outbox.mark_retry(outbox.claim_next(), "421 try later")
    outbox.close()
    alerts = AlertLog(path, clock=lambda: T0 + 2.5)
    alerts.record_alert("2000:gpu_idle", "demo", "alice", "2000", "gpu_idle")
    alerts.record_alert("2001:memory", "demo", "名前", "2001", "memory_near_limit")
    alerts.record_cancellation("2000:gpu_idle:cancel", "demo", Cancellation(
        "alice", "physics", "gpu", "2000", "gpu_idle", (("GPU use", "0 %"),), "cancelled",
        T0 + 3.5))
    alerts.close()


def build_web_state(path: str) -> None:
    from webapp.web.state import WebState

    state = WebState(path)
    state.end_session("session-one", T0 + 3600.5)
    state.end_session("session-two", 4_000_000_000.0)  # not yet expired when read
    with state.connect() as db:
        db.execute("INSERT INTO counters VALUES (?, ?, ?)", ("login/alice", 3, T0 + 900.0))


def main(archive_url: str, outbox: str, web_state: str) -> None:
    import webapp

    print(webapp.__file__)  # the caller checks that the release's code ran
    build_archive(archive_url)
    build_outbox(outbox)
    build_web_state(web_state)


if __name__ == "__main__":
    main(*sys.argv[1:4])
