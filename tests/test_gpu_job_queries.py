"""JOBREPORT_GPU_METRICS beyond the job's own report: the job list, the staff report's
window, a user's history and the live watch read the GPU figures from the source chosen
(webapp/sources/gpu_job_queries.py), and the audit names that source's metrics.

On the real Prometheus of tests/test_gpu_sources.py (the H200 recording written as
jobs-exporter, dcgm-exporter and AMD device-metrics-exporter write it, with the recorded
MIG card and AMD series without a job beside it): under ``dcgm`` and ``amd`` each reader's
figure of the job agrees with the job report's own, within that module's tolerance (half a
percentage point; 1 MiB of memory, 2 MiB of the card's). Each reader asks at the report's
last instant (one scrape after the end): the backfilled blocks have no staleness markers,
so a later instant would see the job's last value held for Prometheus' 5 min lookback.
Under ``jobs`` the PromQL is what it was, word for word; under ``tres`` (no series) every
figure is unknown, not 0.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from tests.helpers.reports import sample_report
from tests.test_gpu_sources import (
    JOB,
    MEMORY_TOLERANCE,
    NODE,
    SCRAPE,
    UTIL_TOLERANCE,
    figures,
    recorded_prometheus,
    samples,
    source,
)
from tests.test_job_list import Accounting, Sacct, _acct, _sacct
from tests.test_prometheus_cluster_label import Recording
from webapp.report.coverage import audited
from webapp.report.job_rows import ListSources, list_jobs
from webapp.settings import Settings
from webapp.sources.gpu_job_queries import NOTHING, any_job, mean_per_job
from webapp.sources.gpu_metrics import AMD, DCGM, JOBS, TRES, GpuMetrics
from webapp.sources.history_data import HistorySource
from webapp.sources.live import LiveSource, Windows
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.sacct import SacctSource
from webapp.sources.sacct_records import delimiter_of
from webapp.staff.data import StaffDataSource, gpu_queries
from webapp.thresholds import Thresholds

# The staff window's sacct line of the job (STAFF_FIELDS, times as Unix seconds).
STAFF_LINE = ("{id}|{id}|alice|research|gpu|COMPLETED|0:0|00:00:48|01:00:00|00:10|4|1||16G||"
              "billing=4,cpu=4,gres/gpu=1,mem=16G,node=1|{start}|{end}|{node}|{start}")


@pytest.fixture(scope="module")
def prom(tmp_path_factory) -> Iterator[tuple[str, datetime, datetime]]:
    """tests/test_gpu_sources.py's recording, in a Prometheus of this module's own."""
    with recorded_prometheus(tmp_path_factory.mktemp("gpu-job-queries")) as found:
        yield found


def readers(src: PrometheusSource, start: datetime, end: datetime, gpu_idle: float = 0.01
            ) -> dict:
    """The job's GPU figures as each reader other than the report gives them, asked at
    the report's last instant."""
    at = end + timedelta(seconds=SCRAPE)
    since = start - timedelta(hours=1)
    rows = list_jobs(ListSources(Accounting([dataclasses.replace(
        _acct(JOB, gpus=1), start_time=start, end_time=end)]), Sacct([_sacct(JOB)]), src,
        lambda cluster, job_id: None), since, at, user="alice")
    line = STAFF_LINE.format(id=JOB, start=int(start.timestamp()), end=int(end.timestamp()),
                             node=NODE)
    staff = StaffDataSource("sacct", "", src, runner=lambda argv: line.replace(
        "|", delimiter_of(argv)) + "\n").jobs(since.timestamp(), at.timestamp())
    span = at.timestamp() - start.timestamp() + 1
    live = LiveSource(src).sample(_acct(JOB, gpus=1), at.timestamp(),
                                  Windows(gpu=span, node=span, memory=span, output=span,
                                          small_files=span))
    past = dataclasses.replace(_sacct(JOB), gpus=1, start_time=start, end_time=end)
    _, busy, _ = HistorySource(SacctSource(runner=lambda argv: ""), src, gpu_idle=gpu_idle
                            )._prometheus([past], at)  # noqa: SLF001 - the history's bulk read
    return {"list": rows[0], "staff": staff[0], "live": live.gpu_utilization,
            "busy": busy.get(JOB)}


@pytest.mark.parametrize("name", ["dcgm", "amd"])
def test_every_reader_agrees_with_the_report(prom, name):
    url, start, end = prom
    report = figures(url, name, start, end)
    # the recording: idle, then 99-100 % (tests/test_gpu_sources.py)
    assert 0.3 < report["util"] < 0.7 and report["peak"] and report["total"]
    got = readers(source(url, name), start, end)
    assert math.isclose(got["list"].gpu_utilization, report["util"], abs_tol=UTIL_TOLERANCE)
    assert got["list"].source == "sacct"
    staff = got["staff"]
    assert math.isclose(staff.gpu_utilization, report["util"], abs_tol=UTIL_TOLERANCE)
    assert abs(staff.gpu_memory_used - report["peak"]) <= MEMORY_TOLERANCE
    assert abs(staff.gpu_memory_total - report["total"]) <= 2 * MEMORY_TOLERANCE
    (gpu,) = got["live"]  # one GPU: the MIG card and the AMD series without a job left out
    assert gpu.label.endswith("/0") and gpu.samples >= len(samples())
    assert math.isclose(gpu.value, report["util"], abs_tol=UTIL_TOLERANCE)
    assert got["busy"] == 1
    # the history's idle cut-off falls on the same mean: just above it, no GPU was busy
    above = readers(source(url, name), start, end, gpu_idle=report["util"] + 0.01)
    assert above["busy"] == 0


def test_the_readers_ask_a_gpu_exporter_under_its_own_job_label(prom):
    url, start, end = prom
    src = PrometheusSource(url, scrape_interval=SCRAPE, session=Recording(),
                           cluster_label="cluster", cluster="v24", gpu_metrics=DCGM)
    readers(src, start, end)
    gpu = [q for q in src.session.queries if "DCGM_" in q]  # type: ignore[attr-defined]
    assert len(gpu) == 7  # the list's, the staff's three, the live watch's two, the history's
    # every DCGM selector names the job (or every job) by hpc_job, and the cluster
    selectors = [m.group(0) for q in gpu
                 for m in re.finditer(r'(DCGM_FI_[A-Z_]+|__name__=~"DCGM[^"]*")[^}]*\}', q)]
    assert selectors and all('cluster="v24"' in s and "hpc_job" in s for s in selectors)
    assert all('label_replace(' in q for q in gpu if "by (jobid)" in q)


# What the readers asked before the source could be chosen, word for word.
TODAY = {
    "list": "avg by (jobid) (avg_over_time(jobs_gpu_utilization_ratio{scope}[{w}]))",
    "staff": ("avg by (jobid) (avg_over_time(jobs_gpu_utilization_ratio{scope}[{w}]))",
              "max by (jobid) (max_over_time(jobs_gpu_memory_used_bytes{scope}[{w}]))",
              "max by (jobid) (max_over_time(jobs_gpu_memory_total_bytes{scope}[{w}]))"),
    "live": ("avg by ({node}, gpu) (avg_over_time(jobs_gpu_utilization_ratio{{{sel}}}[{g}]))",
             "max by ({node}, gpu) (count_over_time(jobs_gpu_utilization_ratio{{{sel}}}[{g}]))"),
    "history": ("sum by (jobid) (avg by (jobid, {node}, gpu) "
                "(avg_over_time(jobs_gpu_utilization_ratio{{{sel}}}[{w}s])) >= bool {idle})"),
}


@pytest.mark.parametrize("cluster", ["", "v24"])
def test_jobs_exporter_s_queries_are_today_s(prom, cluster):
    _, start, end = prom
    src = PrometheusSource("http://prom", scrape_interval=SCRAPE, session=Recording(),
                           cluster_label="cluster" if cluster else "", cluster=cluster)
    assert src.gpu_metrics is JOBS
    readers(src, start, end)
    asked = [q for q in src.session.queries if "jobs_gpu_" in q]  # type: ignore[attr-defined]
    at = end + timedelta(seconds=SCRAPE)
    since = start - timedelta(hours=1)
    scope = '{cluster="v24"}' if cluster else ""
    sel = f'jobid="{JOB}"' + (',cluster="v24"' if cluster else "")
    staff_w = f"{int(at.timestamp() - since.timestamp())}s"
    g = f"{int(at.timestamp() - start.timestamp() + 1)}s"
    history_w = math.ceil(at.timestamp() - start.timestamp())
    history_sel = f'jobid=~"{JOB}"' + (',cluster="v24"' if cluster else "")
    assert asked == [
        TODAY["list"].format(scope=scope, w=f"{math.ceil((at - since).total_seconds())}s"),
        *(q.format(scope=scope, w=staff_w) for q in TODAY["staff"]),
        *(q.format(node="instance", sel=sel, g=g) for q in TODAY["live"]),
        TODAY["history"].format(node="instance", sel=history_sel, w=history_w, idle=0.01),
    ]


def test_tres_figures_are_unknown_not_zero(prom):
    url, start, end = prom
    got = readers(source(url, "tres"), start, end)
    row = got["list"]
    assert row.gpu_utilization is None and row.gpus_busy is None
    assert any("GPU use" in m for m in row.missing)
    staff = got["staff"]
    assert (staff.gpu_utilization, staff.gpu_memory_used, staff.gpu_memory_total) == (
        None, None, None)
    assert got["live"] == () and got["busy"] is None
    assert mean_per_job(TRES, any_job(TRES), "instance", "60s", "2s") == NOTHING
    assert set(gpu_queries(source(url, "tres"), "60s", "instance").values()) == {NOTHING}


# -- the audit names the source's metrics -----------------------------------------------
def _verdicts(*gpu: GpuMetrics) -> dict[str, str]:
    """What each verdict of a one-GPU report rests on (``gpu``: the source, else none given)."""
    report = dataclasses.replace(sample_report("7", "alice"), gpus=1)
    return {v.detector: v.rests_on
            for v in audited(report, Thresholds(), 0.8, *gpu).audit.verdicts}


def test_the_audit_names_the_chosen_source_s_metrics():
    jobs = _verdicts()
    assert jobs["gpu_idle"] == "Prometheus (jobs_gpu_utilization_ratio)"
    assert jobs["gpu_input_bound"] == ("Prometheus (jobs_gpu_utilization_ratio, "
                                       "jobs_gpu_memory_used_bytes; per core "
                                       "jobs_cpu_core_seconds_total)")
    assert _verdicts(JOBS) == jobs
    for gm, metric in ((DCGM, "DCGM_FI_DEV_GPU_UTIL"), (AMD, "gpu_gfx_activity")):
        named = _verdicts(gm)
        for detector in ("gpu_idle", "gpu_util_low", "gpu_cores_idle", "gpu_memory_low",
                         "gpu_input_bound"):
            assert named[detector].startswith(f"Prometheus ({gm.note}"), detector
            assert metric in named[detector] and "jobs_gpu_" not in named[detector]
        assert {k: v for k, v in named.items() if not k.startswith("gpu_")} == {
            k: v for k, v in jobs.items() if not k.startswith("gpu_")}
    assert _verdicts(TRES)["gpu_idle"] == TRES.note


def test_the_service_audits_with_the_setting_s_source():
    from webapp.report.service import ReportService

    def service(name: str) -> ReportService:
        return ReportService(Settings.from_env({
            "JOBREPORT_CONFIG": "", "JOBREPORT_PROMETHEUS_URL": "http://prom",
            "JOBREPORT_GPU_METRICS": name}), accounting=Accounting([]), sacct=Sacct([]))

    assert service("dcgm").gpu_metrics is DCGM and service("jobs").gpu_metrics is JOBS


def test_each_cluster_s_views_read_its_own_source(tmp_path):
    """A deployment serving several clusters: the job list, the staff report and the audit
    of each cluster follow that cluster's JOBREPORT_GPU_METRICS (its cluster file)."""
    from tests.test_settings_clusters import settings
    from webapp.report.service import ReportService
    from webapp.staff.service import _source

    s = settings(tmp_path / "clusters", {
        "v24": "JOBREPORT_GPU_METRICS=dcgm\nJOBREPORT_PROMETHEUS_URL=http://prom-v24:9090\n",
        "v26": "JOBREPORT_GPU_METRICS=amd\n"}, JOBREPORT_PROMETHEUS_URL="http://prom:9090")
    for cluster, gm in (("demo", JOBS), ("v24", DCGM), ("v26", AMD)):
        service = ReportService(s.for_cluster(cluster), accounting=Accounting([]),
                                sacct=Sacct([]))
        assert service.prometheus.gpu_metrics is gm and service.gpu_metrics is gm  # list, audit
        assert _source(s.for_cluster(cluster)).p.gpu_metrics is gm  # staff report
