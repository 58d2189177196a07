"""The sync's bulk read gives a job's one-number figures from its final sample, as the job's
own read does, when that sample falls between the bulk grid's last instant and one scrape
after the job's end (a job writing to its end; seen on a VM cluster: 3.4 against 3.8 MB).

On a real Prometheus: every series one real exporter scrape of a captured job tree holds,
backfilled as 21 scrapes off the grid, each counter growing to its captured value."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jobs_exporter.registry import JobsCollector
from tests.helpers.exporter_scrape import FIXTURES, make_settings
from tests.helpers.mail import free_port
from tests.helpers.prometheus_server import backfill, start_prometheus, stop
from tests.helpers.sync import usage_figures
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.prometheus_bulk import BulkMetrics, JobWindow

SCRAPE = 5
SCRAPES = 21
OFFSET = 2.5  # each scrape half a step after the grid's instants
NODE = "node01"


def openmetrics(t0: float) -> tuple[str, set[str]]:
    """The exposition's series scraped SCRAPES times, counters rising to their value."""
    registry = CollectorRegistry()
    registry.register(JobsCollector(make_settings(FIXTURES / "v1-local", scontrol=""),
                                    user_name=lambda uid: "alice"))
    body, jobs = [], set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if not family.name.startswith("jobs_") or not any("jobid" in s.labels
                                                          for s in family.samples):
            continue
        kind = "counter" if family.type == "counter" else "gauge"
        lines = [f"# TYPE {family.name} {kind}"]
        for s in family.samples:
            if s.name.endswith("_created") or "jobid" not in s.labels:
                continue
            jobs.add(s.labels["jobid"])
            labels = ",".join(f'{k}="{v}"' for k, v in
                              sorted({**s.labels, "instance": f"{NODE}:9306"}.items()))
            for i in range(SCRAPES):
                value = s.value * (i + 1) / SCRAPES if kind == "counter" else s.value
                lines.append(f"{s.name}{{{labels}}} {value} {t0 + OFFSET + SCRAPE * i:.3f}")
        body.append("\n".join(lines))
    return "\n".join(body) + "\n# EOF\n", jobs


@pytest.fixture(scope="module")
def prom(tmp_path_factory) -> Iterator[tuple[str, float, set[str]]]:
    tmp = tmp_path_factory.mktemp("final-sample")
    t0 = float((int(time.time()) - 3600) // 60 * 60)
    text, jobs = openmetrics(t0)
    (tmp / "jobs.om").write_text(text)
    backfill(tmp / "jobs.om", tmp / "data")
    port = free_port()
    proc = start_prometheus(tmp, tmp / "data", port=port)
    try:
        yield f"http://127.0.0.1:{port}", t0, jobs
    finally:
        stop(proc)


def test_the_bulk_read_takes_the_final_sample_after_the_grids_last_instant(prom):
    url, t0, jobs = prom
    source = PrometheusSource(url, scrape_interval=SCRAPE)
    # The last sample at t0 + 102.5: after the end (whole seconds), before end + a scrape;
    # the bulk grid's instants are t0 + 5k, its last at t0 + 100.
    start, end = t0, t0 + OFFSET + SCRAPE * (SCRAPES - 1) - 3.5
    bulk = BulkMetrics(source).fetch([JobWindow(j, start, end, (NODE,)) for j in jobs])
    assert set(bulk) == jobs
    grown = 0
    for job in sorted(jobs):
        one = source.usage(job, datetime.fromtimestamp(start, UTC),
                           datetime.fromtimestamp(end, UTC), (NODE,))
        assert usage_figures(bulk[job]) == usage_figures(one), job
        grown += bool(one.write_bytes or one.read_bytes)
    assert grown  # a counter that rose to its last sample was compared
