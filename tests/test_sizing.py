"""The report's #SBATCH block off the critical path: the history lookup runs beside the
build, its answers are kept per (cluster, user, job name) for a while, and a lookup that
fails leaves a visible gap on a report that still renders.

The report service, the sacct source and the history source are the real ones; only the
sacct runner and the metrics reader are stand-ins, to inject slowness and failure."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from webapp.model import AccountingJob, JobId, SourceUnavailable, Usage
from webapp.renderers import text
from webapp.report.service import ReportService
from webapp.report.sizing import SizingCache
from webapp.settings import Settings
from webapp.sources.history_data import HistorySource
from webapp.sources.sacct import SacctSource

END = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
WAIT = 5.0  # seconds a stand-in waits for the other side before giving up


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=2) as p:
        yield p


def counting(answers: list[str]):
    def lookup() -> str:
        answers.append("asked")
        return f"answer {len(answers)}"
    return lookup


def test_an_answer_is_kept_for_the_ttl_then_asked_again(pool):
    clock, asked = Clock(), []
    cache = SizingCache(ttl=300, pool=pool, clock=clock)
    assert cache.get(("demo", "alice", "train"), counting(asked)).result() == "answer 1"
    clock.now += 299
    assert cache.get(("demo", "alice", "train"), counting(asked)).result() == "answer 1"
    assert cache.get(("demo", "bob", "train"), counting(asked)).result() == "answer 2"
    clock.now += 2  # alice's answer is 301 s old
    assert cache.get(("demo", "alice", "train"), counting(asked)).result() == "answer 3"
    assert len(asked) == 3


def test_the_cache_is_bounded_oldest_first(pool):
    clock, asked = Clock(), []
    cache = SizingCache(ttl=300, size=2, pool=pool, clock=clock)
    for name in ("a", "b", "c"):
        cache.get(name, counting(asked)).result()
    assert len(cache) == 2
    assert cache.get("c", counting(asked)).result() == "answer 3"  # kept
    assert cache.get("a", counting(asked)).result() == "answer 4"  # dropped for "c"


def test_ttl_zero_keeps_nothing(pool):
    asked: list[str] = []
    cache = SizingCache(ttl=0, pool=pool)
    assert [cache.get("k", counting(asked)).result() for _ in range(3)] == \
        ["answer 1", "answer 2", "answer 3"]
    assert len(cache) == 0


def test_a_failed_lookup_is_forgotten_and_a_running_one_shared(pool):
    cache = SizingCache(ttl=300, pool=pool)

    def failing() -> str:
        raise SourceUnavailable("sacct", "exit status 1")

    with pytest.raises(SourceUnavailable):
        cache.get("k", failing).result()
    release, asked = threading.Event(), []

    def slow() -> str:
        asked.append("asked")
        release.wait(WAIT)
        return "answer"

    first = cache.get("k", slow)
    second = cache.get("k", slow)  # asked while the first runs: the same lookup
    release.set()
    assert first is second and second.result() == "answer" and asked == ["asked"]


# --- the service --------------------------------------------------------------------------


def view_job(name: str = "train") -> AccountingJob:
    """The accounting view's record of an ended job (no submit time: no queue lookup)."""
    start = END - timedelta(hours=1)
    return AccountingJob(
        cluster="demo", job_id="4242", job=4242, array_job=None, array_task=None,
        het_job=None, het_offset=None, uid=1001, user="alice", account="research",
        partition=None, job_name=name, state="COMPLETED", exit_code="0:0",
        submit_time=None, start_time=start, end_time=END, cpus=2,
        memory_requested_bytes=4 * 1024**3, time_limit_seconds=7200.0, nodes=("vm",),
        node_list="vm", work_dir="/home/alice", gpus=0)


class View:
    def __init__(self, job: AccountingJob, wait_for: threading.Event | None = None) -> None:
        self.record, self.wait_for = job, wait_for
        self.saw_history: bool | None = None

    def job(self, job_id: JobId) -> AccountingJob:
        if self.wait_for is not None:
            self.saw_history = self.wait_for.wait(WAIT)
        return self.record


class NoPartitions:
    def max_time(self, partition: str):
        raise AssertionError("the job has its own limit")


class Sacct:
    """sacct's runner: the report's own call (``--jobs``) finds nothing (the view knows the
    job); the history call (``--starttime``) records itself, then waits or fails."""

    def __init__(self, fail: bool = False, fail_job: bool = False) -> None:
        self.fail, self.fail_job = fail, fail_job
        self.history_started = threading.Event()
        self.history_calls: list[list[str]] = []
        self.job_calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> str:
        if "--jobs" in argv:
            self.job_calls.append(argv)
            if self.fail_job:
                raise SourceUnavailable("sacct", "exit status 1: slurmdbd unreachable")
            return ""
        self.history_calls.append(argv)
        self.history_started.set()
        if self.fail:
            raise SourceUnavailable("sacct", "exit status 1: slurmdbd unreachable")
        return ""


class SlowMetrics:
    """A Prometheus that answers only once the history lookup has started (or after WAIT
    seconds): a build that looks history up after Prometheus shows here."""

    def __init__(self, started: threading.Event) -> None:
        self.started = started
        self.saw_history: bool | None = None

    def usage(self, job_id: JobId, start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        self.saw_history = self.started.wait(WAIT)
        return Usage()


def service_with(runner: Sacct, ttl: float = 300.0) -> tuple[ReportService, SlowMetrics]:
    settings = dataclasses.replace(Settings(), sizing_cache_seconds=ttl)
    sacct = SacctSource("sacct", runner=runner, cluster="demo")
    metrics = SlowMetrics(runner.history_started)
    service = ReportService(settings, accounting=View(view_job()), sacct=sacct,
                            prometheus=metrics, partitions=NoPartitions(),
                            history=HistorySource(sacct, None))
    return service, metrics


def test_history_is_looked_up_while_prometheus_answers():
    runner = Sacct()
    service, metrics = service_with(runner)
    report = service.build("4242", archive_fallback=False)
    assert metrics.saw_history is True  # started before Prometheus answered, not after
    assert report.sizing is None and len(runner.history_calls) == 1
    assert "--name" in runner.history_calls[0] and "alice" in runner.history_calls[0]


def test_an_owner_known_beforehand_starts_the_history_before_any_source():
    runner = Sacct()
    service, _ = service_with(runner)
    view = service.accounting = View(view_job(), wait_for=runner.history_started)
    service.build("4242", archive_fallback=False, owner=("alice", "train"))
    assert view.saw_history is True and len(runner.history_calls) == 1


def test_a_failed_history_leaves_a_note_and_the_report():
    runner = Sacct(fail=True)
    service, _ = service_with(runner)
    report = service.build("4242", archive_fallback=False)
    assert report.sizing is None and report.state == "COMPLETED"
    (gap,) = [g for g in report.gaps if "#SBATCH" in g.reason]
    assert gap.source == "history" and "sacct: exit status 1: slurmdbd unreachable" in gap.reason
    shown = " ".join(text.render(report).split())
    assert "Note: Data from history unavailable: sacct: exit status 1" in shown
    # The audit names only the sources missing: the report's own figures from sacct stand.
    audit = " ".join(text.render(report, audit=True).split()).split("Audit", 1)[1]
    assert "Sources missing prometheus:" in audit and "sacct" not in audit
    service.build("4242", archive_fallback=False)
    assert len(runner.history_calls) == 2  # a failure is not kept


def test_sacct_down_for_the_report_too_is_one_note():
    service, _ = service_with(Sacct(fail=True, fail_job=True))
    report = service.build("4242", archive_fallback=False)
    assert [g.source for g in report.gaps if g.source != "prometheus"] == ["sacct"]


def test_page_pdf_and_json_ask_sacct_for_the_history_once():
    runner = Sacct()
    service, _ = service_with(runner)
    for resolution in ("plot", "full", "plot"):
        service.build("4242", archive_fallback=False, resolution=resolution)
    assert len(runner.history_calls) == 1
    disabled = Sacct()
    service, _ = service_with(disabled, ttl=0)
    for _ in range(2):
        service.build("4242", archive_fallback=False)
    assert len(disabled.history_calls) == 2


def test_the_reports_sacct_call_skips_alloctres_when_the_view_answered():
    runner = Sacct()
    service, _ = service_with(runner)
    service.build("4242", archive_fallback=False)
    (argv,) = runner.job_calls
    fields = argv[argv.index("--format") + 1].split(",")
    assert "AllocTRES" not in fields and "MaxRSS" in fields and "TotalCPU" in fields


def test_a_forked_process_gets_its_own_pool():
    import os

    from webapp.report.sizing import shared_pool

    parent = shared_pool()
    assert parent.submit(lambda: 1).result() == 1  # the parent's threads exist
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a pool that runs work here
        try:
            ok = shared_pool() is not parent and shared_pool().submit(lambda: 2).result(WAIT) == 2
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)  # the child's end only: a child that wrote nothing reads as b""
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
