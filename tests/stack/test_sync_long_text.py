"""A job whose work directory holds 4,000 backslashes through the real sync, web page, PDF
and email; bob's job, ending after it, archived and emailed with no failure of the first.

Other tests' jobs end between the two; one of them may stop a run (a stand-in record
waited for), so the fixture syncs until both are through rather than expecting one run.

Slurm takes a work directory of at most 4,095 characters (longer: "Pathname ... too long"),
so this is as long as a real one gets: 16 nested directories of 250 backslashes (a name
holds at most 255 bytes). The accounting view gives it whole; the PDF cuts it and says so.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from email import message_from_bytes
from email.policy import default

import pytest
from aiosmtpd.controller import Controller

from tests.helpers.mail import Recorder, free_port
from tests.helpers.stack import wait_until_done
from tests.helpers.sync import mail_env, sbatch, start_watermarks
from tests.helpers.wait import wait_for
from tests.helpers.web import make_client, pdf_of
from webapp.archive.store import Archive
from webapp.cli import main as jobreport
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.accounting import connect_from_url

LEVELS, PER_LEVEL = 16, 250
MAKE_DIRS = f"""
import os, sys
os.makedirs(sys.argv[1])
os.chdir(sys.argv[1])
for _ in range({LEVELS}):
    os.mkdir("\\\\" * {PER_LEVEL})
    os.chdir("\\\\" * {PER_LEVEL})
"""
SHORT = ("-c1", "--mem=50M", "--time=2", "-o", "/dev/null")


def _pdf_text(body: bytes, tmp_path, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(body)
    out = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True,
                         capture_output=True, text=True).stdout
    return " ".join(out.split())


def _records(db_url: str, ids: list[str]) -> dict[str, dict]:
    """The accounting view's rows of ``ids`` once they are the jobs' own (not stand-ins)."""
    conn = connect_from_url(db_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT job_id, job_name, work_dir, end_time FROM jobs WHERE"
                        " cluster = 'demo' AND job_id IN %s", ([int(i) for i in ids],))
            rows = {str(r["job_id"]): r for r in cur.fetchall()}
    finally:
        conn.close()
    done = all(r["job_name"] != "allocation" and r["end_time"] for r in rows.values())
    return rows if len(rows) == len(ids) and done else {}


@pytest.fixture(scope="module")
def synced(stack_env, tmp_path_factory):
    """The two jobs, run and synced (archive + email) into an archive of this test's own."""
    tmp = tmp_path_factory.mktemp("long-text")
    base = f"/home/alice/jobreport-deep-{int(time.time())}"  # /tmp may not be writable
    subprocess.run(["runuser", "-u", "alice", "--", "python3", "-c", MAKE_DIRS, base],
                   check=True)
    work_dir = base + ("/" + "\\" * PER_LEVEL) * LEVELS
    assert len(work_dir) < 4096
    t0 = int(time.time()) - 1
    deep = sbatch("alice", "-J", "deep-dir", *SHORT, "--chdir", work_dir, "--wrap", "sleep 2")
    after = sbatch("bob", "-J", "after-deep", *SHORT, f"--dependency=afterany:{deep}",
                   "--wrap", "sleep 1")
    for job_id in (deep, after):  # other tests keep the node busy: run these next
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "Priority=4294967000"],
                       check=False)
    recorder = Recorder()
    smtp = Controller(recorder, hostname="127.0.0.1", port=free_port())
    smtp.start()
    env = mail_env(stack_env, tmp, smtp.port)
    start_watermarks(env, t0)
    try:
        wait_until_done([deep, after], timeout=600)
        records = wait_for(lambda: _records(stack_env["JOBREPORT_DB_URL"], [deep, after]), 120,
                           "slurmdbd holding the jobs' own records")
        runs = []
        with pytest.MonkeyPatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            while True:
                status = jobreport(["sync", "--limit", "500"])
                with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
                    logged = {s: {j: o for j, _, o in archive.outcomes("demo", s)}
                              for s in ("archive", "email")}
                    logged["failing"] = {j: e for s in ("archive", "email")
                                         for j, _, _, e in archive.failures("demo", s)}
                runs.append((status, logged))
                through = all(j in logged[s] for j in (deep, after)
                              for s in ("archive", "email"))
                if through or len(runs) == 10:
                    break
                time.sleep(2)
        yield {"deep": deep, "after": after, "work_dir": work_dir, "records": records,
               "runs": runs, "env": env, "recorder": recorder, "tmp": tmp}
    finally:
        smtp.stop()
        subprocess.run(["scancel", deep, after], check=False, capture_output=True)
        subprocess.run(["runuser", "-u", "alice", "--", "rm", "-rf", base], check=False)


@pytest.mark.stack
def test_the_whole_work_dir_reaches_the_report(synced):
    record = synced["records"][synced["deep"]]
    assert record["work_dir"] == synced["work_dir"]
    assert record["work_dir"].count("\\") == LEVELS * PER_LEVEL


@pytest.mark.stack
def test_both_jobs_archived_and_emailed_and_the_deep_one_never_failed(synced):
    deep, after = synced["deep"], synced["after"]
    *_, (status, logged) = synced["runs"]
    assert [run["failing"].get(deep) for _, run in synced["runs"]
            if deep in run["failing"]] == []  # the long text never failed a run
    assert logged["archive"].get(deep) == "archived"
    assert logged["archive"].get(after) == "archived"  # the next user's job
    assert logged["email"].get(deep) == "queued"
    assert logged["email"].get(after) == "queued"
    with Archive(synced["env"]["JOBREPORT_ARCHIVE_URL"]) as archive:
        assert archive.get("demo", deep).summary["work_dir"] == synced["work_dir"]
        assert [f for f in archive.failures("demo", "email") if f[0] in (deep, after)] == []


@pytest.mark.stack
def test_the_emailed_pdf_cuts_the_path_and_says_so(synced):
    messages = {}
    for _, raw in synced["recorder"].messages:
        msg = message_from_bytes(raw, policy=default)
        messages[msg["X-Jobreport-Job"]] = msg
    assert synced["after"] in messages
    attachments = [p for p in messages[synced["deep"]].iter_attachments()
                   if p.get_content_type() == "application/pdf"]
    assert len(attachments) == 1
    text = _pdf_text(attachments[0].get_content(), synced["tmp"], "mail.pdf")
    assert f"(cut, {len(synced['work_dir']):,} characters)" in text
    assert "/home/alice/jobreport-deep-" in text


@pytest.mark.stack
def test_web_page_and_pdf_of_the_job(synced, stack_env, tmp_path):
    settings = Settings.from_env(stack_env)
    client = make_client(dataclasses.replace(settings, staff=frozenset({"staff"}),
                                             web_state=str(tmp_path / "web-state.sqlite")),
                         ReportService(settings), "staff")
    page = client.get(f"/jobs/{synced['deep']}")
    assert page.status_code == 200
    assert "\\" * PER_LEVEL in page.get_data(as_text=True)
    pdf = pdf_of(client.get, f"/jobs/{synced['deep']}.pdf")
    assert pdf.status_code == 200 and pdf.mimetype == "application/pdf"
    text = _pdf_text(pdf.data, tmp_path, "web.pdf")
    assert f"(cut, {len(synced['work_dir']):,} characters)" in text
