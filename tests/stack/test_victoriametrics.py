"""Long-term storage: Prometheus remote_write into VictoriaMetrics gives the same report.

A Prometheus of the test's own scrapes the stack's exporters and remote-writes every
sample to a VictoriaMetrics of its own; a real job runs; its JSON report built with
JOBREPORT_PROMETHEUS_URL pointed at either gives the same numbers within 1 %."""

from __future__ import annotations

import json
import time

import pytest
import requests

from tests.helpers import stack
from tests.helpers.longterm import prometheus_with_victoriametrics
from tests.helpers.sync import known
from webapp.renderers import json as json_renderer
from webapp.report.service import ReportService
from webapp.settings import Settings

pytestmark = pytest.mark.stack

JOB = stack.StackJob(
    "long-term", "alice", ("-c2", "--mem=600M", "--time=5"),
    "python3 -c 'b = bytearray(200 * 2**20)\nimport time\nt = time.time()\n"
    "while time.time() < t + 60: pass'")
# Rates (CPU, I/O) over a window that reaches before a series' first sample differ: Prometheus
# extrapolates from the samples inside the window, VictoriaMetrics from the first sample
# (both documented). Those first points, one rate window long, are compared by neither.
RATE_SERIES = ("cpu_cores", "io_read_bytes_per_second", "io_write_bytes_per_second")
RATE_WINDOW = 20.0  # webapp.sources.prometheus.rate_window at 5 s scrapes


def report(env: dict[str, str], url: str) -> dict:
    settings = Settings.from_env({**known(env), "JOBREPORT_PROMETHEUS_URL": url})
    return json.loads(json_renderer.render(ReportService(settings).build(
        JOB_ID[0], archive_fallback=False)))


JOB_ID: list[str] = []


def close(a, b, path: str, out: list[str]) -> None:
    """Every number within 1 % (series compared by their mean), every other value equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            close(a[k], b[k], f"{path}.{k}", out)
    elif path.startswith(".series.") and isinstance(a, list):
        assert [s["label"] for s in a] == [s["label"] for s in b], path
        for sa, sb in zip(a, b, strict=True):
            pa, pb = dict(sa["points"]), dict(sb["points"])
            assert pa.keys() == pb.keys(), f"{path}[{sa['label']}] instants"
            first = min(pa, default=0.0)
            skip = RATE_WINDOW if path.rsplit(".", 1)[1] in RATE_SERIES else 0.0
            for t in sorted(pa):
                if t >= first + skip:
                    close(pa[t], pb[t], f"{path}[{sa['label']}]@{t:.0f}", out)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]", out)
    elif isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        if a != pytest.approx(b, rel=0.01, abs=1e-9):
            out.append(f"{path}: {a} vs {b}")
    elif a != b:
        out.append(f"{path}: {a!r} vs {b!r}")


def test_victoriametrics_gives_the_same_report(stack_env, tmp_path):
    with prometheus_with_victoriametrics(tmp_path) as (prom, vm):
        time.sleep(6)  # one scrape of the exporters before the job starts
        JOB_ID[:] = [stack.submit(JOB)]
        stack.wait_until_done(JOB_ID)
        # The final samples: scraped (5 s), remote-written (1 s batches), queryable.
        deadline = time.monotonic() + 60
        query = {"query": f'count(jobs_cpu_seconds_total{{jobid="{JOB_ID[0]}"}})'}
        while time.monotonic() < deadline:
            time.sleep(2)
            answers = [requests.get(f"{u}/api/v1/query", params=query, timeout=5).json()
                       for u in (prom, vm)]
            if all(a["data"]["result"] for a in answers):
                break
        time.sleep(12)  # past the job's last scrape and its staleness marker
        from_prometheus, from_vm = report(stack_env, prom), report(stack_env, vm)
    assert from_prometheus["usage"]["memory_max_usage_bytes"]  # the job was seen
    # A minute of 5 s points: most compared point by point, past the first rate window.
    assert len(from_prometheus["series"]["cpu_cores"][0]["points"]) >= 12
    # (A job that started at once has no queue context in either: the same gap.)
    assert not [g for g in from_prometheus["gaps"] + from_vm["gaps"]
                if g["source"] == "prometheus"]
    differences: list[str] = []
    close(from_prometheus, from_vm, "", differences)
    assert differences == []
