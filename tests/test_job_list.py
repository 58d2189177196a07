"""Job lists: parameter parsing (400 on anything else), filters, sorting, waste, the
figures' sources, and the pages on the fake service."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.reports import sample_report
from tests.helpers.web import login, make_client
from webapp.lists.job_list import ListQuery, select, top_waste, totals
from webapp.model import AccountingJob, SacctJob, SourceUnavailable, Step, cpu_efficiency
from webapp.report.job_rows import JobRow, ListSources, list_jobs
from webapp.report.peak import sacct_peak
from webapp.settings import Settings, SettingsError
from webapp.unused import GIB
from webapp.web.query_params import BadQuery, list_query

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def row(job_id: str, **kw) -> JobRow:
    base = dict(cluster="demo", job_id=job_id, name=f"job{job_id}", user="alice",
                account="research", state="COMPLETED", submit=NOW, end=NOW, elapsed=3600.0,
                cpus=4, nodes=1, gpus=0, memory_requested_per_node=8 * 2**30)
    return JobRow(**{**base, **kw})


# -- parameters -------------------------------------------------------------------------
def test_defaults():
    q = list_query({})
    assert (q.days, q.state, q.name, q.findings_only, q.sort, q.order) == (
        7, "", "", False, "submit", "desc")


def test_every_parameter():
    q = list_query({"days": "30", "state": "failed", "name": " train ", "findings": "1",
                         "sort": "cpu_eff", "order": "asc", "cluster": "b"}, ("a", "b"))
    assert q == ListQuery(30, "FAILED", "train", True, "cpu_eff", "asc", "b")


@pytest.mark.parametrize("args", [
    {"days": "0"}, {"days": "91"}, {"days": "7.5"}, {"days": "-1"}, {"days": "1e2"},
    {"state": "DONE"}, {"state": "COMPLETED;DROP"}, {"name": "a\nb"}, {"name": "x" * 201},
    {"findings": "yes"}, {"sort": "bogus"}, {"sort": "cpu_eff'--"}, {"order": "up"},
    {"cluster": "elsewhere"},
])
def test_garbage_is_refused(args):
    with pytest.raises(BadQuery):
        list_query(args, ("demo",))


def test_sort_links_toggle_the_current_column_only():
    q = list_query({"sort": "cpu_eff", "order": "desc", "state": "FAILED"})
    assert q.sort_link("cpu_eff") == {"sort": "cpu_eff", "order": "asc", "state": "FAILED"}
    assert q.sort_link("name") == {"sort": "name", "order": "asc", "state": "FAILED"}
    assert q.sort_link("mem_waste")["order"] == "desc"


# -- filters and sorting ----------------------------------------------------------------
def test_select_filters_and_sorts_unknown_last():
    rows = [row("1", cpu_efficiency=0.5, findings=2), row("2", cpu_efficiency=None, findings=0),
            row("3", cpu_efficiency=0.9, state="FAILED", findings=1, name="train-b"),
            row("4", cpu_efficiency=0.1, findings=None)]
    asc = select(rows, ListQuery(sort="cpu_eff", order="asc"))
    assert [r.job_id for r in asc] == ["4", "1", "3", "2"]
    desc = select(rows, ListQuery(sort="cpu_eff", order="desc"))
    assert [r.job_id for r in desc] == ["3", "1", "4", "2"]
    assert [r.job_id for r in select(rows, ListQuery(state="FAILED"))] == ["3"]
    assert [r.job_id for r in select(rows, ListQuery(name="TRAIN"))] == ["3"]
    assert {r.job_id for r in select(rows, ListQuery(findings_only=True))} == {"1", "3"}


# -- waste ------------------------------------------------------------------------------
def test_waste_of_one_job():
    r = row("1", cpus=4, elapsed=7200.0, cpu_seconds=7200.0, gpus=2, gpus_busy=0.2,
            nodes=2, memory_requested=20 * 2**30, memory_peak=4 * 2**30)
    assert r.cpu_hours_unused == pytest.approx(4 * 2 - 2)  # 8 core-hours held, 2 used
    assert r.gpu_hours_unused == pytest.approx(2 * 2 - 0.2 * 2)
    assert r.memory_gib_hours_unused == pytest.approx(6 * 2 * 2)  # 6 GiB x 2 nodes x 2 h
    assert row("2", gpus=0).gpu_hours_unused == 0.0
    assert row("3", cpu_seconds=None).cpu_hours_unused is None
    assert row("4", memory_requested=8 * 2**30, memory_peak=None).memory_gib_hours_unused is None
    # Over 100 % (hyperthreads, a peak above the request) is no negative waste.
    assert row("5", cpu_seconds=4 * 3600 * 1.3).cpu_hours_unused == 0.0
    assert row("6", memory_peak=9 * 2**30, memory_requested=8 * 2**30
               ).memory_gib_hours_unused == 0.0


def test_top_waste_and_totals():
    rows = [row(str(i), cpu_seconds=None if e is None else e * 4 * 3600)
            for i, e in enumerate((0.9, 0.1, 0.5, None, 1.0))]
    assert [r.job_id for r in top_waste(rows, "cpu_waste", 2)] == ["1", "2"]
    assert totals(rows)["cpu_waste"] == pytest.approx(4 * (0.1 + 0.9 + 0.5))


# -- where the figures come from ---------------------------------------------------------
def _acct(job_id: str, state: str = "COMPLETED", gpus: int = 0) -> AccountingJob:
    start = NOW - timedelta(hours=2)
    return AccountingJob(
        cluster="demo", job_id=job_id, job=int(job_id), array_job=None, array_task=None,
        het_job=None, het_offset=None, uid=1001, user="alice", account="research",
        partition="debug", job_name=f"n{job_id}", state=state, exit_code="0:0",
        submit_time=start, start_time=start,
        end_time=None if state == "RUNNING" else NOW, cpus=2,
        memory_requested_bytes=4 * 2**30, time_limit_seconds=None,
        nodes=("vm",), node_list="vm", work_dir=None, gpus=gpus)


def _sacct(job_id: str) -> SacctJob:
    steps = (Step("batch", "batch", "COMPLETED", "0:0", 7200.0, 3600.0, 2**30, 2, ("vm",),
                  tasks=1, max_rss_node="vm"),)
    return SacctJob(job_id, "n", "alice", "research", "debug", "COMPLETED", "0:0", 7200.0,
                    None, 2, 4 * 2**30, 0, None, None, "vm", None, steps)


class Accounting:
    def __init__(self, jobs):
        self.jobs, self.asked = jobs, []

    def recent(self, since, user=None, account=None):
        self.asked.append((since, user, account))
        return self.jobs


class Sacct:
    def __init__(self, jobs=(), down=False):
        self.jobs, self.down = jobs, down

    def recent(self, since, user=None, account=None):
        if self.down:
            raise SourceUnavailable("sacct", "no answer within 30 s")
        return self.jobs


class Prometheus:
    def __init__(self, answer):
        self.answer, self.queries = answer, []

    def vector(self, query, time=None):
        self.queries.append(query)
        return self.answer


def test_a_rows_top_finding_is_the_first_its_report_shows(tmp_path):
    """From the report itself and from its archived summary (the archive's pages): the
    most severe finding, as the report page orders them, whatever the stored order."""
    from dataclasses import replace

    from tests.helpers.reports import many_findings_report
    from webapp.archive.store import Archive
    from webapp.lists.job_page import named
    from webapp.renderers.presentation import sorted_findings
    from webapp.report.archived import archive_record
    from webapp.report.job_rows import row_from_report
    from webapp.staff.archived import report_staff_job, staff_row

    report = many_findings_report()
    report = replace(report, findings=tuple(reversed(report.findings)))  # least severe first
    first = sorted_findings(report)[0]
    assert first != report.findings[0] and first.severity.value == "critical"
    record = archive_record(report)
    with Archive(str(tmp_path / "archive.sqlite")) as archive:
        assert archive.put(record)
        [archived] = named(archive, [staff_row(report.cluster, report_staff_job(
            report, record.submit_time, record.end_time))])
    for listed in (row_from_report(report), archived):
        top = listed.top_finding
        assert top is not None and (top.name, top.severity, top.message) == \
            (first.name, first.severity.value, first.message)
        assert listed.findings == len(report.findings)
    assert row(job_id="1").top_finding is None  # no findings known: none on top either


def test_archive_first_then_sacct_with_the_reports_formulas():
    archived = sample_report("11", "alice")
    src = ListSources(Accounting([_acct("11"), _acct("12", gpus=1), _acct("13", "RUNNING")]),
                      Sacct([_sacct("12")]), Prometheus([({"jobid": "12"}, 0.25)]),
                      lambda cluster, job: archived if job == "11" else None)
    rows = {r.job_id: r for r in list_jobs(src, NOW - timedelta(days=7), NOW, user="alice")}
    a = rows["11"]
    assert a.source == "archive" and a.cpu_efficiency == archived.cpu_efficiency
    assert a.findings == len(archived.findings)
    assert a.memory_efficiency == archived.memory_efficiency
    s = rows["12"]
    job = _sacct("12")
    assert s.source == "sacct" and s.cpu_efficiency == cpu_efficiency(3600.0, 7200.0, 2)
    assert s.memory_peak == sacct_peak(job).bytes
    assert s.memory_efficiency == pytest.approx(2**30 / (4 * 2**30))
    assert s.gpu_utilization == 0.25 and s.findings is None
    assert any("not archived" in m for m in s.missing)
    r = rows["13"]
    assert r.cpu_efficiency is None and "not ended" in r.missing[0]
    assert src.prometheus.queries == [
        "avg by (jobid) (avg_over_time(jobs_gpu_utilization_ratio[604800s]))"]


def test_sacct_down_leaves_blanks_and_says_so():
    src = ListSources(Accounting([_acct("21")]), Sacct(down=True), Prometheus([]),
                      lambda cluster, job: None)
    rows = list_jobs(src, NOW - timedelta(days=7), NOW, account="research")
    assert rows[0].cpu_efficiency is None and rows[0].missing
    assert src.gaps and "sacct unavailable" in src.gaps[0]
    assert src.accounting.asked[0][1:] == (None, "research")


def test_memory_waste_uses_gib():
    r = row("1", memory_peak=0, memory_requested=int(GIB), elapsed=3600.0)
    assert r.memory_gib_hours_unused == pytest.approx(1.0)


# -- the pages, on the fake service ------------------------------------------------------
def test_home_lists_only_my_jobs_and_pages_check_access(client):
    login(client, "alice")
    page = client.get("/").get_data(as_text=True)
    assert 'data-job="4242"' in page and 'data-job="5000"' not in page
    assert client.get("/?sort=bogus").status_code == 400
    assert client.get("/?days=1000").status_code == 400
    assert client.get("/users/alice").status_code == 200
    assert client.get("/users/bob").status_code == 403
    assert client.get("/accounts/research").status_code == 403


def test_staff_pages_and_name_validation(client):
    login(client, "staffer")
    page = client.get("/users/bob").get_data(as_text=True)
    assert 'data-job="5000"' in page and 'data-job="4242"' not in page
    assert 'id="waste-cpu_waste"' in page
    assert client.get("/users/bob%27%20OR%201=1").status_code == 400
    assert client.get("/accounts/research?sort=mem_waste&order=asc").status_code == 200


# -- several clusters --------------------------------------------------------------------
def test_clusters_setting():
    s = Settings.from_env({"JOBREPORT_CLUSTER": "a",
                           "JOBREPORT_CLUSTERS": "b=http://prom-b:9090/, c"})
    assert s.cluster_names == ("a", "b", "c") and s.multi_cluster
    assert s.for_cluster("b").prometheus_url == "http://prom-b:9090"
    assert s.for_cluster("c").prometheus_url == "" and s.for_cluster("a") is s
    assert not Settings.from_env({}).multi_cluster
    for bad in ("b;drop", "b=http://u:p@host"):
        with pytest.raises(SettingsError):
            Settings.from_env({"JOBREPORT_CLUSTERS": bad})


def test_cluster_urls(web_settings):
    from dataclasses import replace

    client = make_client(replace(web_settings, clusters={"other": ""}))
    login(client, "staffer")
    assert client.get("/jobs/4242").status_code == 200  # today's URLs stay
    page = client.get("/c/demo/jobs/4242").get_data(as_text=True)
    assert 'href="/c/demo/jobs/4242.pdf"' in page
    assert client.get("/c/nowhere/jobs/4242").status_code == 404
    r = client.get("/?job=4242&cluster=demo")
    assert r.status_code == 302 and r.headers["Location"].endswith("/c/demo/jobs/4242")
    assert client.get("/?job=4242&cluster=nowhere").status_code == 400
    home = client.get("/").get_data(as_text=True)
    assert '<select id="cluster" name="cluster">' in home
