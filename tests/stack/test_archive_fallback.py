"""A real job archived, then its series deleted from Prometheus (admin API): its page,
PDF and email still render, from the archive, saying so. Uses its own Prometheus (with
the admin API) on a free port, scraping the stack's exporter every 5 s like the stack."""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace

import pytest
import requests

from tests.helpers import stack
from tests.helpers.mail import free_port
from tests.helpers.sync import known, run_sync
from webapp.mail.sending import message
from webapp.renderers import html, pdf
from webapp.report.service import ReportService
from webapp.settings import Settings

NOTE = "from the archive, at"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prom")
    port = free_port()
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 5s\nscrape_configs:\n  - job_name: jobs\n"
        "    static_configs:\n" + stack.exporter_targets_yaml())
    with open(tmp / "prometheus.log", "w") as log:
        proc = subprocess.Popen(
            ["prometheus", f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--web.enable-admin-api"], stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if requests.get(f"{url}/-/ready", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


def test_deleted_series_render_from_the_archive(stack_env, prometheus, tmp_path):
    job = stack.StackJob("archived-busy", "alice",
                         ("-c1", "--mem=200M", "--time=5", *stack.off_debug("gpu3")),
                         stack.BUSY.format(s=25))
    job_id = stack.submit(job)
    stack.wait_until_done([job_id])
    stack.wait_for_scrape_after(prometheus, time.time())  # the job's last samples are in
    env = {**known(stack_env), "JOBREPORT_PROMETHEUS_URL": prometheus,
           "JOBREPORT_SCRAPE_INTERVAL": "5", "JOBREPORT_ARCHIVE_URL": str(tmp_path / "a.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")}
    settings = Settings.from_env(env)
    live = ReportService(settings).build(job_id)
    assert live.usage.cpu_cores and not any(g.source == "archive" for g in live.gaps)
    assert run_sync(env, "--jobid", job_id, "--direction", "archive") == 0

    match = {"match[]": f'{{jobid="{job_id}"}}'}
    requests.post(f"{prometheus}/api/v1/admin/tsdb/delete_series", params=match,
                  timeout=30).raise_for_status()
    requests.post(f"{prometheus}/api/v1/admin/tsdb/clean_tombstones",
                  timeout=60).raise_for_status()
    # The head block's index may still name the series; what matters is no samples left.
    now = time.time()
    gone = requests.get(f"{prometheus}/api/v1/query_range", timeout=10, params={
        "query": f'jobs_cpu_seconds_total{{jobid="{job_id}"}}', "start": now - 600,
        "end": now, "step": 5}).json()
    assert gone["data"]["result"] == []

    report = ReportService(settings).build(job_id)
    assert report.gaps[0].source == "archive"
    assert NOTE in report.gaps[0].reason
    # The sync read the series on its bulk window's step grid, the live build on the job's
    # own: on a loaded machine the busy loop's rate moves between scrapes, so the two
    # grids' means differ by up to a quarter.
    assert report.usage.cpu_cores[0].mean() == pytest.approx(
        live.usage.cpu_cores[0].mean(), rel=0.25)
    assert {f.name for f in report.findings} == {
        f.name for f in live.findings}

    page = html.render(report)
    assert NOTE in page and "<svg" in page or "<img" in page
    text = subprocess.run(["pdftotext", "-", "-"], input=pdf.render(report),
                          capture_output=True, check=True).stdout.decode()
    assert NOTE in " ".join(text.split())
    mail = message(report, "alice@example.org", replace(settings, mail_from="j@example.org"))
    body = mail.get_body(("plain",)).get_content()
    assert NOTE in body
    shown = stack.jobreport("show", job_id, env=env)
    assert shown.returncode == 0 and NOTE in shown.stdout
