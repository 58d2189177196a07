"""The report's queries give the figures the whole-window queries gave, on real jobs.

Counters and high-watermarks are read from a job's last samples, gauge peaks from
hour-long pieces, per-core means from raw samples: each is checked, within 1 %, against
the first version's queries (tests/helpers/prometheus_before.py) on the stack's own
Prometheus, at both resolutions, and with the end moved past the last sample so that the
tail finds nothing and the whole-window definitions are used.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.helpers.prometheus_before import differences, figures_before, scalars_of
from webapp.model import JobId

JOBS = ("busy", "mem-over-request", "gpu-untouched", "two-cpus-one-used")


@pytest.mark.parametrize("name", JOBS)
@pytest.mark.parametrize("resolution", ["plot", "full"])
def test_figures_equal_the_whole_window_queries(stack_jobs, service, name, resolution):
    acct = service.accounting.job(JobId.parse(stack_jobs[name]))
    src = service.prometheus
    usage = src.usage(acct.job_id, acct.start_time, acct.end_time, acct.nodes, resolution)
    before = figures_before(src, acct.job_id, acct.start_time, acct.end_time, acct.nodes,
                            resolution)
    assert usage.cpu_cores and usage.cpu_per_core and usage.memory_rss
    found = scalars_of(usage)
    assert found["read_syscalls"] and found["threads_max"] and found["memory_limit_bytes"]
    if name == "gpu-untouched":
        assert usage.gpu_utilization and found["gpu_memory_total_bytes"]
    assert differences(before, usage) == []


def test_a_tail_without_samples_falls_back_to_the_whole_window(stack_jobs, service):
    acct = service.accounting.job(JobId.parse(stack_jobs["busy"]))
    end = acct.end_time + timedelta(minutes=20)  # the last sample is far before this "end"
    src = service.prometheus
    usage = src.usage(acct.job_id, acct.start_time, end, acct.nodes)
    before = figures_before(src, acct.job_id, acct.start_time, end, acct.nodes)
    assert usage.read_syscalls and usage.memory_max_usage_bytes
    assert differences(before, usage) == []
