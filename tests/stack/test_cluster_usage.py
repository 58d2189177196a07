"""On the real stack: the cluster page's GPUs allocated per account, from the real
Prometheus, end at the time of the query while a GPU job runs."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.helpers import stack
from tests.helpers.wait import wait_for
from webapp.sources.cluster_overview import ClusterOverviewSource
from webapp.sources.from_settings import prometheus_from

HOLDER = stack.StackJob("cluster-usage-now", "alice",
                        ("-c1", "--mem=100M", "-p", "gpu", "--gres=gpu:1", "--time=5"),
                        "sleep 120")


def test_gpu_allocation_ends_at_the_query_time(settings):
    source = ClusterOverviewSource(prometheus_from(settings), settings.cluster)
    job_id = stack.submit(HOLDER)
    try:
        stack.wait_until_running(job_id)
        seen: list = []

        def held() -> bool:  # once slurm-exporter's squeue (every 10 s) and a scrape saw it
            now = time.time()
            seen[:] = [now, source.overview(now).usage]
            recent = [v for s in seen[1] for t, v in s.points if t >= now - 60]
            return bool(recent) and max(recent) >= 1

        wait_for(held, 90, lambda: f"the GPU held in the usage: {seen[1]}", every=2)
        now, usage = seen
        # From now - 7 days the last instant fell up to a step (606 s) short of now.
        assert max(s.points[-1][0] for s in usage if s.points) == pytest.approx(now, abs=1e-3)
    finally:
        subprocess.run(["scancel", job_id], check=False)
