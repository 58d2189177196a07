"""`jobreport sync` writes each archived job's staff row, equal to the row `staff-report
--record` writes for the same job, so `--from-archive` needs no daily `--record`.

The jobs are the stack's captured staff window (``fixtures/sacct/local-staff-window.psv``,
17 ended jobs of alice and bob, with their steps). `--record` runs as it does on a site
(``record_window``: the window's sacct call through the staff source's parser, its bulk
queries) with the capture as sacct's answer; the sync runs its archive direction
(``Syncer.run``) over the same records, each report built by the real report service.
Prometheus holds no series of these jobs on either side (its answers are empty); the
Prometheus figures are checked on a report with GPU, energy and queue series below.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.helpers.reports import gpu_report
from webapp.archive.staff_rows import COLUMNS, StaffRows, Window
from webapp.archive.store import Archive
from webapp.model import (
    AccountingJob,
    JobId,
    JobNotFound,
    PendingReason,
    QueueContext,
    SourceUnavailable,
)
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.ended import EndedJob
from webapp.sources.no_metrics import NoMetrics
from webapp.sources.sacct_records import delimiter_of
from webapp.staff.archived import build_staff_report_sql, report_staff_job, staff_row
from webapp.staff.data import StaffDataSource, parse_window
from webapp.staff.service import record_window
from webapp.sync.options import SyncOptions
from webapp.sync.run import Syncer
from webapp.thresholds import StaffConfig

WINDOW = (Path(__file__).resolve().parents[1] / "fixtures/sacct/local-staff-window.psv"
          ).read_text()
SINCE, UNTIL = 1795442800, 1795443100
CLUSTER = "demo"


class EmptyPrometheus:
    """A Prometheus holding no series of these jobs: every bulk query answers nothing."""

    node_label = "instance"
    scrape_interval = 5.0
    cluster_matcher = ""  # one cluster's series

    def vector(self, query: str, at: float) -> list:
        return []


class NoQueue:
    """slurm-exporter's series are not in that Prometheus either: the queue is a gap."""

    name = "cluster"

    def queue(self, *args: object) -> QueueContext:
        raise SourceUnavailable("cluster", "no slurm-exporter series")


class WindowSacct:
    """sacct answering from the captured window: the staff call's text (in the delimiter
    it asked for), and each job's own record for the report."""

    def __init__(self) -> None:
        self.records = {j.job_id: j.sacct for j in parse_window(WINDOW, SINCE, UNTIL)}

    def run(self, argv: list[str]) -> str:
        return WINDOW.replace("|", delimiter_of(argv))

    def job(self, job_id):  # noqa: ANN001, ANN201
        try:
            return self.records[str(job_id)]
        except KeyError:
            raise JobNotFound(str(job_id)) from None

    def array(self, job_id):  # noqa: ANN001, ANN201
        raise JobNotFound(str(job_id))


class WindowAccounting:
    """The accounting view's records of the window's jobs (what it holds of each: the
    sacct record's identity, request and times) and the sync's selection."""

    def __init__(self) -> None:
        self.records = {}
        for j in parse_window(WINDOW, SINCE, UNTIL):
            s = j.sacct
            self.records[j.job_id] = AccountingJob(
                CLUSTER, j.job_id, int(j.raw_id), None, None, None, None, 1001, s.user,
                s.account, s.partition, s.job_name, s.state, s.exit_code,
                _utc(j.submit), s.start_time, s.end_time, s.cpus, s.memory_requested_bytes,
                s.time_limit_seconds, j.nodes, s.node_list or "", s.work_dir, s.gpus)

    def job(self, job_id):  # noqa: ANN001, ANN201
        try:
            return self.records[str(JobId.of(job_id))]
        except KeyError:
            raise JobNotFound(str(job_id)) from None

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        out = sorted(EndedJob(int(a.end_time.timestamp()), a.job_id,
                              int(a.submit_time.timestamp()), CLUSTER)
                     for a in self.records.values())
        return [j for j in out if since <= j.end_time <= until][:limit]


def _utc(t: float | None):  # noqa: ANN202
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC) if t else None


def _rows(archive: Archive) -> dict[str, dict]:
    return {r["job_id"]: r for r in StaffRows(archive.db).top(
        Window(CLUSTER, 0, 2**40), "1 = 1", (), None, None)}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.from_env({"JOBREPORT_CLUSTER": CLUSTER, "JOBREPORT_PROMETHEUS_URL": "",
                              "JOBREPORT_ARCHIVE_URL": str(tmp_path / "synced.sqlite"),
                              "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")})


def _sync(settings: Settings, archived: int = 17) -> Archive:
    metrics = NoMetrics(CLUSTER)
    sacct = WindowSacct()
    service = ReportService(settings, accounting=WindowAccounting(), sacct=sacct,
                            prometheus=metrics, cluster=NoQueue())
    syncer = Syncer(settings, service=service)
    try:
        result = syncer.run(SyncOptions(direction="archive", limit=100, max_span=10**9),
                            clock=lambda: UNTIL)
    finally:
        syncer.close()
    assert result.error is None and result.outcomes["archive"]["archived"] == archived
    return Archive(settings.archive_url)


def _record(settings: Settings, tmp_path: Path) -> Archive:
    """`staff-report --record` over the window, into an archive of its own."""
    recorded = dataclasses.replace(settings, archive_url=str(tmp_path / "recorded.sqlite"))
    source = StaffDataSource("sacct", CLUSTER, EmptyPrometheus(),  # type: ignore[arg-type]
                             runner=WindowSacct().run)
    assert record_window(recorded, SINCE, UNTIL, source=source) == 17
    return Archive(recorded.archive_url)


def test_the_sync_writes_the_rows_record_writes(settings, tmp_path):
    with _record(settings, tmp_path) as a:
        want = _rows(a)
    with _sync(settings) as b:
        got = _rows(b)
        assert b.get(CLUSTER, "676") is not None  # the report is archived beside its row
    assert len(got) == len(want) == 17
    diffs = {}
    for job_id, row in want.items():
        diff = {c: (got[job_id][c], row[c]) for c in COLUMNS if got[job_id][c] != row[c]}
        if diff:
            diffs[job_id] = diff
    assert not diffs
    assert sum(r["memory_peak"] is not None for r in got.values()) >= 10


def test_staff_report_from_the_synced_archive_is_the_recorded_one(settings, tmp_path):
    def report(archive: Archive):  # noqa: ANN202
        with archive:
            return build_staff_report_sql(StaffRows(archive.db), CLUSTER, SINCE, UNTIL,
                                          StaffConfig(), settings.thresholds, {})

    synced, recorded = report(_sync(settings)), report(_record(settings, tmp_path))
    assert synced.jobs == recorded.jobs == 17
    assert [t.rows for t in synced.tables] == [t.rows for t in recorded.tables]
    assert any(t.rows for t in synced.tables)


def test_a_second_sync_and_a_sync_by_hand_keep_one_row_a_job(settings):
    with _sync(settings) as archive:
        first = _rows(archive)
    with _sync(settings, archived=0) as archive:  # the watermark is past every job
        assert _rows(archive) == first
    metrics = NoMetrics(CLUSTER)
    service = ReportService(settings, accounting=WindowAccounting(), sacct=WindowSacct(),
                            prometheus=metrics, cluster=NoQueue())
    syncer = Syncer(settings, service=service)
    try:
        result = syncer.run(SyncOptions(job_id="676"), clock=lambda: UNTIL)
    finally:
        syncer.close()
    assert result.outcomes["archive"]["archived again"] == 1
    with Archive(settings.archive_url) as archive:
        assert _rows(archive) == first
        assert StaffRows(archive.db).count(Window(CLUSTER, 0, 2**40)) == 17


def test_the_prometheus_figures_are_those_the_window_queries_ask():
    """GPU use: each GPU's mean, averaged (``avg by (jobid) (avg_over_time(...))`` over
    GPUs with equal samples); GPU memory: the highest sample; node CPU seconds: the mean
    cores busy x elapsed; energy: the counters' total; the pending reasons as seen."""
    report = gpu_report()
    u = report.usage
    seen = QueueContext("gpu", 120.0, (PendingReason("Resources", 90.0, report.submit_time),))
    report = dataclasses.replace(report, queue=seen,
                                 usage=dataclasses.replace(u, energy_joules=3.6e6))
    row = staff_row(CLUSTER, report_staff_job(report, 1795000000, 1795003600))
    samples = [[v for _, v in s.points] for s in u.gpu_utilization]
    assert len(samples) == 2 and len(samples[0]) == len(samples[1])
    assert row["gpu_utilization"] == pytest.approx(sum(map(sum, samples)) / sum(map(len, samples)))
    assert row["gpu_memory_used"] == max(v for s in u.gpu_memory_used for _, v in s.points)
    assert row["gpu_memory_total"] == u.gpu_memory_total_bytes
    import json

    node_cpu = json.loads(row["node_cpu"])
    [(node, cores)] = [(s.label, s.points) for s in u.cpu_cores][:1]
    assert node_cpu[node] == pytest.approx(
        sum(v for _, v in cores) / len(cores) * report.elapsed_seconds)
    assert row["energy_joules"] == 3.6e6
    assert json.loads(row["pending_reasons"]) == [["Resources", 90.0]]
    assert (row["submit_time"], row["end_time"]) == (1795000000, 1795003600)
    assert row["memory_peak"] == report.memory_peak_bytes
