"""Reports and a fake report service shared by the web, PDF, email and outbox tests.

Not a test module (it holds no tests); the reports are built in code so every field
a renderer shows has a known value. The integration tests use the real service.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from webapp.detectors import detect_all
from webapp.model import (
    ArraySummary,
    ArrayTask,
    Finding,
    Gap,
    InvalidJobId,
    JobId,
    JobNotFound,
    JobReport,
    MemoryPeak,
    PeakSource,
    Series,
    Severity,
    SizingSuggestion,
    SourceUnavailable,
    Usage,
)

GIB = 1024**3
START = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)
LATEX_PAYLOAD = "\\input{/etc/passwd} $&%#_{}~^\\"
HTML_PAYLOAD = "<script>alert(1)</script>"
HEADER_PAYLOAD = "x\r\nBcc: evil@example.org"
# 50 characters: an RFC 2047 encoded-word whose decoded text holds CR LF and a header
ENCODED_WORD_PAYLOAD = "=?utf-8?q?x=0D=0AReply-To:_attacker@evil.example?="


def _series(label: str, n: int, f) -> Series:
    t0 = START.timestamp()
    return Series(label, tuple((t0 + 30 * i, float(f(i))) for i in range(n)))


def sample_report(job_id: str = "4242", user: str = "alice", name: str = "train-model",
                  n: int = 120, **changes) -> JobReport:
    """A two-node, two-GPU job with findings; ``changes`` replace any field."""
    usage = Usage(
        cpu_cores=(_series("node01", n, lambda i: 1.5 + 0.5 * math.sin(i / 7)),
                   _series("node02", n, lambda i: 0.2)),
        cpu_per_core=tuple(_series(f"node01/cpu{c}", n, lambda i, c=c: 0.9 if c < 2 else 0.02)
                           for c in range(4)),
        memory_rss=(_series("node01", n, lambda i: 2 * GIB + i * 10_000_000),
                    _series("node02", n, lambda i: 1 * GIB)),
        memory_limit_bytes=16 * GIB,
        memory_max_usage_bytes=4 * GIB,
        gpu_utilization=(_series("gpu0", n, lambda i: 0.85),
                         _series("gpu1", n, lambda i: 0.0)),
        gpu_memory_used=(_series("gpu0", n, lambda i: 10 * GIB),),
        gpu_memory_total_bytes=40 * GIB,
        read_bytes=5e9, write_bytes=1e9,
        io_read_rate=(_series("node01", n, lambda i: 1e6 * (i % 10)),),
        io_write_rate=(_series("node01", n, lambda i: 2e5),),
        processes_max=12, threads_max=40, open_files_max=80, open_files_limit_ratio_max=0.08,
        scratch_in_use=False,
    )
    report = JobReport(
        job_id=job_id, cluster="demo", user=user, uid=1001, account="research",
        job_name=name, partition="gpu", nodes=("node01", "node02"), work_dir="/home/alice/run",
        cpus=8, memory_requested_bytes=16 * GIB, gpus=2, time_limit_seconds=4 * 3600,
        state="COMPLETED", exit_code="0:0", submit_time=START - timedelta(minutes=5),
        start_time=START, end_time=START + timedelta(seconds=30 * n),
        elapsed_seconds=30.0 * n, cpu_seconds=30.0 * n * 1.7,
        memory_peak=MemoryPeak(3 * GIB, PeakSource.PROMETHEUS, "node01"),
        usage=usage,
        findings=(
            Finding("cpu_efficiency_low", Severity.WARNING,
                    "The job used 21% of its 8 allocated CPUs.",
                    "Ask for --cpus-per-task=2 next time.", {"cpu_efficiency": 0.21}),
            Finding("gpu_idle", Severity.CRITICAL, "GPU gpu1 was idle for the whole job.",
                    "Request --gres=gpu:1.", {"gpu": "gpu1", "mean_utilization": 0.0}),
            Finding("memory_overrequest", Severity.INFO,
                    "Peak memory was 3.0 GiB of 16 GiB requested.",
                    "Ask for --mem=4G next time.", {"memory_peak_bytes": 3 * GIB}),
        ),
    )
    return replace(report, **changes) if changes else report


SIZING = SizingSuggestion(
    options=(("--mem", "4G"), ("--time", "01:30:00"), ("--cpus-per-task", "2"),
             ("--gres", "gpu:1")),
    based_on=12, saved=("1.2 GPU-hours", "6.0 CPU-hours"),
    basis="jobs named 'train-model' of alice, last 30 days")


def detected(report: JobReport) -> JobReport:
    """The report with the findings the real detectors make of it (sentences included)."""
    return replace(report, findings=detect_all(report))


def gpu_report(**changes) -> JobReport:
    """The sample two-GPU job (one GPU idle) with its real findings and a sizing block."""
    return detected(sample_report(sizing=SIZING, **changes))


def busy_cpu_report(job_id: str = "4300", name: str = "solver", **changes) -> JobReport:
    """One node, four cores kept busy, no GPU: nothing to find."""
    n = 120
    usage = Usage(
        cpu_cores=(_series("node01", n, lambda i: 3.9 + 0.05 * math.sin(i / 5)),),
        cpu_per_core=tuple(_series(f"node01/cpu{c}", n, lambda i: 0.97) for c in range(4)),
        memory_rss=(_series("node01", n, lambda i: 5 * GIB + i * 4_000_000),),
        memory_limit_bytes=8 * GIB, memory_max_usage_bytes=6 * GIB,
        read_bytes=2e9, write_bytes=5e8,
        io_read_rate=(_series("node01", n, lambda i: 2e5 * (i % 5)),),
        io_write_rate=(_series("node01", n, lambda i: 5e4),),
        processes_max=5, threads_max=8, open_files_max=30, open_files_limit_ratio_max=0.03,
        scratch_in_use=True,
    )
    report = sample_report(
        job_id, name=name, nodes=("node01",), cpus=4, gpus=0,
        memory_requested_bytes=8 * GIB, partition="cpu", usage=usage,
        cpu_seconds=30.0 * n * 3.9, time_limit_seconds=2 * 3600,
        memory_peak=MemoryPeak(int(5.5 * GIB), PeakSource.PROMETHEUS, "node01"), **changes)
    return detected(report)


def many_findings_report(**changes) -> JobReport:
    """Everything wrong at once: idle GPU, idle cores, memory, files, small I/O, time."""
    base = sample_report("4400", name="everything-wrong")
    usage = replace(base.usage, open_files_max=5000, open_files_limit_ratio_max=0.92,
                    write_bytes=50 * GIB, write_syscalls=20e6, threads_max=64)
    return detected(replace(base, usage=usage, time_limit_seconds=24 * 3600,
                            memory_requested_bytes=64 * GIB, sizing=SIZING, **changes))


def array_report(tasks: int = 60, **changes) -> JobReport:
    """An array of ``tasks`` tasks; the single figures are those of its first task."""
    listed = tuple(
        ArrayTask(f"4500_{i}", "COMPLETED" if i % 7 else "FAILED", 600.0 + 20 * i,
                  0.9 - 0.005 * i, int((1 + i / 10) * GIB))
        for i in range(1, tasks + 1))
    summary = ArraySummary(
        tasks=listed, elapsed_p50=1200.0, elapsed_p95=1750.0,
        memory_peak_p50=4 * GIB, memory_peak_p95=6.7 * GIB,
        cpu_efficiency_p50=0.75, cpu_efficiency_p95=0.88, outliers=("4500_60",),
        suggested_mem="8G", suggested_time="00:40:00")
    report = busy_cpu_report(job_id="4500", figures_from="4500_1", array=summary,
                             name="sweep", **changes)
    return report


def gap_report(job_id: str = "4243", user: str = "alice") -> JobReport:
    """A report whose Prometheus source was down: no series, one visible gap."""
    return sample_report(job_id, user, usage=Usage(),
                         gaps=(Gap("prometheus", "connection refused to 127.0.0.1:9090"),))


class FakeService:
    """Same methods as ``webapp.report.service.ReportService``, answering from a dict."""

    def __init__(self, reports: dict[str, JobReport] | None = None,
                 ended: list[str] | None = None, down: bool = False) -> None:
        self.reports = dict(reports or {})
        self.ended = ended
        self.down = down
        self.built: list[str] = []
        self.owners: list[str] = []  # job ids owner() was asked about
        self.resolutions: list[str] = []  # the resolution of each build

    def build(self, job_id: JobId | str, resolution: str = "plot",
              archive_fallback: bool = True) -> JobReport:
        job_id = str(JobId.of(job_id))  # raises InvalidJobId like the real service
        self.resolutions.append(resolution)
        if self.down:
            raise SourceUnavailable("accounting", "Can't connect to MySQL server on '127.0.0.1'")
        self.built.append(job_id)
        try:
            return self.reports[job_id]
        except KeyError:
            raise JobNotFound(job_id) from None

    def job_list(self, since, now, user=None, account=None):
        """The reports' own figures as list rows (the real service reads them in bulk)."""
        from webapp.report.job_rows import row_from_report

        if self.down:
            raise SourceUnavailable("accounting", "Can't connect to MySQL server on '127.0.0.1'")
        return [row_from_report(r) for r in self.reports.values()
                if (user is not None and r.user == user)
                or (account is not None and r.account == account)], []

    def job_ids(self, user: str, since) -> frozenset[str]:
        if self.down:
            raise SourceUnavailable("accounting", "Can't connect to MySQL server on '127.0.0.1'")
        return frozenset(k for k, r in self.reports.items() if r.user == user)

    def owner(self, job_id: JobId | str) -> str | None:
        return self.holder(job_id)[0]

    def holder(self, job_id: JobId | str) -> tuple[str | None, str | None]:
        job_id = str(JobId.of(job_id))
        if self.down:
            raise SourceUnavailable("accounting", "Can't connect to MySQL server on '127.0.0.1'")
        self.owners.append(job_id)
        try:
            report = self.reports[job_id]
        except KeyError:
            raise JobNotFound(job_id) from None
        return report.user, report.account

    def ended_jobs(self, since: datetime) -> list[str]:
        return list(self.ended if self.ended is not None else self.reports)


def default_service() -> FakeService:
    """The service the web and browser tests use: alice's and bob's jobs, hostile names."""
    reports = [
        sample_report("4242", "alice"),
        gap_report("4243", "alice"),
        sample_report("5000", "bob", name="bob-job"),
        sample_report("6000_1", "alice", name=HTML_PAYLOAD),
        sample_report("6001", "alice", name=LATEX_PAYLOAD),
        sample_report("6002+1", "alice", name=HEADER_PAYLOAD),
    ]
    return FakeService({r.job_id: r for r in reports})


__all__ = ["SIZING", "FakeService", "InvalidJobId", "array_report", "busy_cpu_report",
           "default_service", "detected", "gap_report", "gpu_report", "many_findings_report",
           "sample_report"]
