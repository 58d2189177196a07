"""The site's wording templates (webapp/renderers/site_wording.py): `policy check` on the
policy directory's wording/ folder, and the emails and page signed with them."""

from __future__ import annotations

import io
import logging
import subprocess
from datetime import UTC, datetime

import pytest

from tests.helpers.captured_reports import REPORTS, captured
from tests.helpers.web import make_client, password_settings
from webapp.archive.week_sums import build_digest
from webapp.cli import build_parser
from webapp.cli.policy import run_policy
from webapp.model import AccountingJob
from webapp.renderers import digest as digest_renderer
from webapp.renderers import email as email_renderer
from webapp.renderers import site_wording
from webapp.settings import Settings
from webapp.watch import message
from webapp.watch.rules import Alert

SITE_FOOTER = "HPC support, hpc@example.org\nDocs: https://hpc.example.org/jobs <new>\n"


def wording(tmp_path, name: str, text: str):
    folder = tmp_path / "wording"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def check(tmp_path) -> tuple[int, str, str]:
    args = build_parser().parse_args(["policy", "check", "--partitions", "debug,gpu",
                                      str(tmp_path)])
    out, err = io.StringIO(), io.StringIO()
    return run_policy(args, Settings(cluster="demo"), out, err), out.getvalue(), err.getvalue()


def test_the_sample_is_the_captured_report_the_tests_use():
    assert (site_wording.SAMPLE.read_bytes()
            == (REPORTS / "stack-busy-79.json").read_bytes())


@pytest.mark.parametrize("name", sorted(site_wording.PARTS))
def test_each_default_passes_the_check(name):
    values = site_wording.sample_values(captured("busy"))[name]
    assert site_wording.check_file(site_wording.default_path(name), name, values) == []


def test_a_good_folder_passes_and_is_counted(tmp_path):
    wording(tmp_path, "owner_email_footer.txt",
            "{% set who = user or 'you' %}Questions about job {{ job_id }}, {{ who }}?\n"
            "{% for f in findings %}{{ f.name }} {% endfor %}{{ report_url }}\n")
    wording(tmp_path, "report_footer.txt", "Used {{ cpu_efficiency | percent }} of its cores")
    code, out, err = check(tmp_path)
    assert (code, err) == (0, "")
    assert "2 wording templates" in out


@pytest.mark.parametrize("name, text, wanted", [
    ("digest_footer.txt", "Hello {{ user }},\n{% if cluster %}\nsee {{ cluster }\n",
     ":3: bad template: unexpected '}'"),
    ("digest_footer.txt", "{{ user }}\n\nYour {{ job_id }} and {{ nope }}\n",
     ":3: unknown name 'job_id' (a digest_footer template is given cluster, first_day,"),
    ("watch_footer.txt", "{% for x in [1] %}{{ x }}{% endfor %}\n{{ cpu_efficiency }}\n",
     ":2: unknown name 'cpu_efficiency'"),
    ("report_footer.txt", "Contact\n{{ cpus / 0 }}\n",
     ":2: does not render with a sample report: ZeroDivisionError"),
    ("owner_email_footer.txt", "{% set seen = [] %}\n\n{{ seen.append(1) }}\n",
     ":3: does not render with a sample report: SecurityError"),
    ("footer.txt", "x", ":1: no wording part 'footer.txt' (use owner_email_footer.txt,"),
])
def test_check_names_file_and_line(tmp_path, name, text, wanted):
    path = wording(tmp_path, name, text)
    code, _, err = check(tmp_path)
    assert code == 1
    assert f"{path}{wanted}" in err


def test_rules_and_wording_problems_are_listed_together(tmp_path):
    (tmp_path / "site.toml").write_text('[[override]]\nrule = "short_jobs"\nenabled = false\n')
    path = wording(tmp_path, "watch_footer.txt", "{{ nope }}")
    code, out, err = check(tmp_path)
    assert (code, out) == (1, "")
    assert "no detector 'short_jobs'" in err and f"{path}:1: unknown name 'nope'" in err


def test_the_owners_email_is_signed_with_the_sites_wording(tmp_path):
    wording(tmp_path, "owner_email_footer.txt", SITE_FOOTER + "Job {{ job_id }}.")
    report = captured("busy")
    msg = email_renderer.render(report, "alice@example.org", "jobreport@example.org",
                                pdf=b"", policy_dir=str(tmp_path))
    text = msg.get_body(("plain",)).get_content()
    assert f"-- \n{SITE_FOOTER}Job {report.job_id}." in text
    assert "on behalf of the cluster support team" not in text
    html = msg.get_body(("html",)).get_content()
    assert '<a href="https://hpc.example.org/jobs"' in html and "&lt;new&gt;" in html


def test_a_site_template_that_fails_gives_way_to_the_default(tmp_path, caplog):
    wording(tmp_path, "owner_email_footer.txt", "{{ cpus / 0 }}")
    with caplog.at_level(logging.ERROR):
        msg = email_renderer.render(captured("busy"), "alice@example.org",
                                    "jobreport@example.org", pdf=b"", policy_dir=str(tmp_path))
    assert "on behalf of the cluster support team" in msg.get_body(("plain",)).get_content()
    assert "owner_email_footer.txt does not render" in caplog.text


def test_without_a_policy_the_emails_read_as_before():
    msg = email_renderer.render(captured("busy"), "alice@example.org", "jobreport@example.org",
                                pdf=b"")
    assert ("-- \njobreport, on behalf of the cluster support team.\nReply to this email if "
            "a finding looks wrong.\n") in msg.get_body(("plain",)).get_content()


def test_the_digest_is_signed_with_the_sites_wording(tmp_path):
    wording(tmp_path, "digest_footer.txt", "{{ cluster }} support, week of {{ first_day }}")
    d = build_digest("demo", "alice", 0, 7 * 86400, [])
    msg = digest_renderer.render(d, "alice@example.org", "jobreport@example.org", "<id@x>",
                                 policy_dir=str(tmp_path))
    assert "-- \ndemo support, week of 1970-01-01\n" in msg.get_body(("plain",)).get_content()


def test_the_watchs_notice_is_signed_with_the_sites_wording(tmp_path):
    wording(tmp_path, "watch_footer.txt",
            "{% if cancelled %}Cancelled under rule {{ rule }}{% else %}Rule {{ rule }}"
            "{% endif %}: hpc@example.org")
    start = datetime(2026, 11, 23, tzinfo=UTC)
    job = AccountingJob(
        cluster="demo", job_id="7", job=7, array_job=None, array_task=None, het_job=None,
        het_offset=None, uid=1000, user="alice", account="phys", partition="gpu",
        job_name="train", state="RUNNING", exit_code="0:0", submit_time=start,
        start_time=start, end_time=None, cpus=4, memory_requested_bytes=None,
        time_limit_seconds=None, nodes=(), node_list="", work_dir=None, gpus=1)
    alert = Alert("gpu_idle", job, "idle", "cancel it", ())
    msg = message.render(alert, "demo", "alice@example.org", "jobreport@example.org",
                         cancelled=True, policy_dir=str(tmp_path))
    text = msg.get_body(("plain",)).get_content()
    assert "-- \nCancelled under rule gpu_idle: hpc@example.org" in text


def test_the_report_page_shows_the_sites_footer(tmp_path):
    wording(tmp_path, "report_footer.txt",
            "Questions on job {{ job_id }}: hpc@example.org, https://hpc.example.org/jobs")
    client = make_client(password_settings(tmp_path, policy_dir=str(tmp_path)), user="alice")
    page = client.get("/jobs/4242").get_data(as_text=True)
    assert '<footer id="site-footer"><p>Questions on job 4242: <a href="mailto:hpc@' in page
    assert '<a href="https://hpc.example.org/jobs"' in page
    (tmp_path / "none").mkdir()
    plain = make_client(password_settings(tmp_path / "none"), user="alice")
    assert "site-footer" not in plain.get("/jobs/4242").get_data(as_text=True)


def _pdf_text(body: bytes) -> str:
    out = subprocess.run(["pdftotext", "-", "-"], input=body, capture_output=True,
                         check=True).stdout.decode()
    return " ".join(out.split())


@pytest.mark.needs("pdflatex")
def test_the_sites_footer_ends_the_text_and_pdf_too_and_an_edit_is_in_the_next_pdf(tmp_path):
    path = wording(tmp_path, "report_footer.txt",
                   "Questions on job {{ job_id }}: hpc@example.org\n\nDocs: hpc.example.org")
    client = make_client(password_settings(tmp_path, policy_dir=str(tmp_path)), user="alice")
    txt = client.get("/jobs/4242.txt").get_data(as_text=True)
    assert txt.endswith("\n\nQuestions on job 4242: hpc@example.org\nDocs: hpc.example.org\n")
    first = client.get("/jobs/4242.pdf")
    assert first.status_code == 200
    assert "Questions on job 4242: hpc@example.org Docs: hpc.example.org" in _pdf_text(first.data)
    # The ended job's PDF is kept; an edited footer is a new key, so a new PDF.
    path.write_text("Ask <hpc@example.org>")
    second = _pdf_text(client.get("/jobs/4242.pdf").data)
    assert "Ask <hpc@example.org>" in second and "Questions on job" not in second
    report = captured("busy")
    shown = site_wording.report_footer(str(tmp_path), report)
    assert shown == "Ask <hpc@example.org>"
    from webapp.renderers import html, text

    assert 'Ask &lt;<a href="mailto:hpc@example.org">' in html.render(report, footer=shown)
    assert text.render(report).rstrip().endswith(f"jobreport show {report.job_id} "
                                                 "--details --audit")


def test_the_kept_pdfs_key_names_the_footers_version_only_when_the_site_has_one(tmp_path):
    from webapp.renderers.pdf_store import pdf_key

    assert site_wording.version(str(tmp_path), "report_footer") == ""
    assert pdf_key("demo", "1", str(tmp_path)) == pdf_key("demo", "1") == "demo/1"
    wording(tmp_path, "report_footer.txt", "Ask hpc@example.org")
    one = site_wording.version(str(tmp_path), "report_footer")
    assert pdf_key("demo", "1", str(tmp_path)) == f"demo/1@{one}"
    wording(tmp_path, "report_footer.txt", "Ask help@example.org")
    two = site_wording.version(str(tmp_path), "report_footer")
    assert len(one) == 12 and one != two and pdf_key("demo", "1", str(tmp_path)) == f"demo/1@{two}"
