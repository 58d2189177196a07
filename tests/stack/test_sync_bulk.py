"""The sync's bulk summaries on the real stack: the session's real jobs read with one
PromQL query per metric per window give the reports (findings, peaks, CPU use, queue
context, the samples' coverage, energy and carbon) the per-job queries give, with a
request count that does not grow per job."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from tests.helpers.sync import known, usage_figures
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.ended import EndedJob
from webapp.sources.prometheus_bulk import RANGE, BulkMetrics, plan
from webapp.sync.bulk import prefetch, windows

pytestmark = pytest.mark.stack


# The partition's state when the job was submitted: the bulk path reads it at the last
# point of its step grid at or before the submit time (at most one step earlier), and so
# the most GPUs free during the wait, which starts from that state (run ea: two T4s free
# 6 s before a submit, one taken 0.8 s before it: 2 in the bulk read, 1 in the job's own).
SNAPSHOT = ("cpus_idle", "cpus_total", "gpus_available", "queue_length", "gpus_available_max")


def _lasting(report, step: float) -> tuple:
    """The pending reasons seen longer than two steps: a reason Slurm gave for a scrape
    or two may fall between the bulk query's grid points (the job's own query reads
    every scrape; on a loaded machine two scrapes of a reason can be a step and a bit
    apart, and the grid catch neither)."""
    return (tuple(r for r in report.queue.reasons if r.seconds > 2 * step)
            if report.queue else ())


def _queue(report):
    # The partition's usual time limit counts jobs submitted up to the moment of asking;
    # the reasons are compared by _same_waits.
    q = report.queue
    if q is None:
        return None
    blank = dict.fromkeys(SNAPSHOT)
    return dataclasses.replace(q, usual_time_limit_jobs=0, reasons=(), **blank)


def _same_waits(one, many, step: float) -> bool:
    """Each pending reason either read saw for longer than two steps, the other saw too,
    for as long to one step and first at the same time to two: the bulk query reads the
    reasons on its window's step grid, the job's own query on its own (a reason seen for
    two steps and a bit by one may be two steps exactly by the other)."""
    def seen_by(a, b) -> bool:
        other = {r.reason: r for r in (b.queue.reasons if b.queue else ())}
        return all(r.reason in other and abs(r.seconds - other[r.reason].seconds) <= step
                   and abs((r.first_seen - other[r.reason].first_seen).total_seconds())
                   <= 2 * step for r in _lasting(a, step))
    return seen_by(one, many) and seen_by(many, one)


def _snapshot_seen(service, report, bulk_queue) -> bool:
    """Each of the bulk snapshot's figures equals the per-job one taken at the submit time
    or up to one step (the scrape interval, for a session's short window) before it. The
    figures come from different commands (sinfo, squeue) polled at different moments, so
    each is matched on its own."""
    scrape = service.prometheus.scrape_interval
    seen: dict[str, list] = {f: [] for f in SNAPSHOT}
    for back in range(int(scrape) + 1):
        q = service.cluster.queue(report.job_id, report.partition,
                                  report.submit_time - timedelta(seconds=back),
                                  report.start_time)
        for f in SNAPSHOT:
            seen[f].append(getattr(q, f))
    return all(getattr(bulk_queue, f) in seen[f] for f in SNAPSHOT)


def test_bulk_reports_equal_per_job_reports(stack_env, stack_jobs):
    settings = Settings.from_env(known(stack_env))
    service = ReportService(settings)
    # Not coverage-half: another module deletes half of its samples, maybe in between.
    ids = sorted(jid for name, jid in stack_jobs.items() if name != "coverage-half")
    ended = [EndedJob(0, jid, 0, settings.cluster) for jid in ids]
    bulk = prefetch(service, ended)
    # Every job came from the batch: none was asked for on its own.
    assert set(bulk.accounting.prefetched) == set(ids)
    assert set(bulk.sacct.prefetched) == set(ids)
    assert set(bulk.prometheus.prefetched) == set(ids)
    assert set(bulk.prometheus.covered) == set(ids)
    compared = identical = 0
    for jid in ids:
        one, many = service.build(jid, archive_fallback=False), bulk.build(jid,
                                                                         archive_fallback=False)
        assert sorted(f.name for f in many.findings) == sorted(f.name for f in one.findings), jid
        assert many.memory_peak_bytes == one.memory_peak_bytes, jid
        assert many.usage.memory_max_usage_bytes == one.usage.memory_max_usage_bytes, jid
        assert many.usage.read_bytes == one.usage.read_bytes, jid
        # The samples' coverage (so the verdicts withheld for thin samples) and the carbon
        # the job's own report has: asked of the live source, job by job.
        assert many.coverage is not None or one.usage.empty, jid
        assert many.coverage == one.coverage, jid
        assert many.energy == one.energy, jid
        assert usage_figures(many.usage) == usage_figures(one.usage), jid
        # each core's mean, a job shorter than a scrape's included (its one sample may fall
        # after its whole-second end: both read up to one scrape after it)
        assert [s.label for s in many.usage.cpu_per_core] == \
            [s.label for s in one.usage.cpu_per_core], jid
        assert sum(s.mean() or 0 for s in many.usage.cpu_per_core) == pytest.approx(
            sum(s.mean() or 0 for s in one.usage.cpu_per_core), abs=0.01), jid
        assert _queue(many) == _queue(one), jid
        assert _same_waits(one, many, settings.scrape_interval), (jid, one.queue, many.queue)
        if one.queue and any(getattr(one.queue, f) != getattr(many.queue, f) for f in SNAPSHOT):
            assert _snapshot_seen(service, one, many.queue), (jid, one.queue, many.queue)
        assert many.usage.empty == one.usage.empty, jid
        if one.usage.cpu_cores:
            if one.usage.step_seconds == many.usage.step_seconds:
                # the same step: the same instants (prometheus.grid_start), the same points
                assert many.usage.cpu_cores == one.usage.cpu_cores, jid
                identical += 1
            a = sum(s.mean() for s in one.usage.cpu_cores)
            b = sum(s.mean() for s in many.usage.cpu_cores)
            assert b == pytest.approx(a, abs=0.1), jid
            compared += 1
    assert compared >= 5  # busy, idle, two-cpus, memory, gpu... had series
    assert identical >= 5  # the short jobs: one step, whichever way they were fetched


def test_bulk_request_count_is_per_window_not_per_job(stack_env, stack_jobs):
    settings = Settings.from_env(known(stack_env))
    service = ReportService(settings)
    ids = sorted(stack_jobs.values())
    acct = service.accounting.jobs(ids)
    sj = service.sacct.jobs(ids)
    jobs = windows(ids, acct, sj)
    bulk = BulkMetrics(service.prometheus)
    usage = bulk.fetch(jobs)
    batches = plan(jobs, service.prometheus.scrape_interval)
    assert len(usage) == len(jobs) == len(ids)
    # range queries, one-number figures, per-core value and time, the GPUs' energy, faults
    # and identities (no GPU reported a fault: no query dates one), the samples' coverage
    # of the nodes and of the GPUs (short jobs: one request each)
    per_window = len(RANGE) + 1 + 2 + 1 + 2
    assert bulk.requests == per_window * len(batches)
    assert len(batches) <= 3 < len(ids)  # ~15 short jobs of a session: one or two classes
