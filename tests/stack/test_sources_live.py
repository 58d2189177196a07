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
    # and the tests) agree with sacct's TotalCPU, and never exceed one core.
    sacct = service.sacct.job(acct.job_id)
    elapsed = (acct.end_time - acct.start_time).total_seconds()
    used = sacct.total_cpu_seconds / elapsed
    peak = max(s.max() for s in usage.cpu_cores)
    assert used * 0.9 <= peak <= 1.2
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
