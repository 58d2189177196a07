"""The Prometheus and accounting sources against the real Prometheus and MariaDB of the
local stack (their parsers on captures: tests/test_sources.py)."""

from __future__ import annotations

import pytest

from webapp.model import JobId, JobNotFound


def test_prometheus_source_reads_a_real_busy_job(stack_jobs, settings, service):
    acct = service.accounting.job(JobId.parse(stack_jobs["busy"]))
    usage = service.prometheus.usage(acct.job_id, acct.start_time, acct.end_time, acct.nodes)
    assert usage.cpu_cores, "no CPU series"
    # One busy thread: the cores it got (the machine's two are shared by the stack's nodes
    # and the tests) never exceed one core, and its busiest moment holds at least sacct's
    # TotalCPU less what the rate series cannot see: the first and the last scrape
    # interval of the run, at most one core each. (Under load the thread gets its CPU
    # unevenly: a run's mean of 0.46 cores had a peak of 0.40 in the windows the series
    # covers.) The whole-job figure against sacct's is the per-core means' below.
    sacct = service.sacct.job(acct.job_id)
    elapsed = (acct.end_time - acct.start_time).total_seconds()
    used = sacct.total_cpu_seconds / elapsed
    peak = max(s.max() for s in usage.cpu_cores)
    unseen = 2 * settings.scrape_interval  # seconds of one core
    assert (sacct.total_cpu_seconds - unseen) / elapsed <= peak <= 1.2, (used, peak)
    assert usage.memory_rss and usage.threads_max >= 1
    # whole-job mean per core, from the last counter sample (up to one 5 s scrape before
    # the end of a 30 s run): sacct's figure, less at most that scrape's share
    assert used - 0.2 <= sum(s.mean() for s in usage.cpu_per_core) <= used + 0.05
    assert usage.memory_limit_bytes == 500 * 2**20


def test_accounting_source_real_rows(stack_jobs, service):
    job = service.accounting.job(JobId.parse(stack_jobs["gpu-untouched"]))
    assert job.user == "bob" and job.account == "teaching"
    assert job.gpus == 1 and job.cpus == 1
    assert job.memory_requested_bytes == 500 * 2**20
    assert job.time_limit_seconds == 600
    oom = service.accounting.job(JobId.parse(stack_jobs["oom"]))
    assert oom.state == "OUT_OF_MEMORY"
    with pytest.raises(JobNotFound):
        service.accounting.job(JobId.parse("99999999"))
