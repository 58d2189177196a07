"""One Prometheus holding several clusters' ``jobs_*`` series whose job ids overlap
(JOBREPORT_PROMETHEUS_CLUSTER_LABEL): every selector of those series also matches the
cluster's label.

On a real Prometheus: two captured job shapes (tests/helpers/sync_shapes.py) replayed as the same
job id on the same node name, one labelled ``cluster="v24"``, the other ``cluster="v26"``,
backfilled with promtool into a Prometheus of its own (tests/helpers/prometheus_server.py). Each
shape is also replayed alone under an id of its own: what a cluster's read of the shared
id must equal. Then every query each reader sends is checked to name the cluster.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import requests

from tests.helpers.mail import free_port
from tests.helpers.prometheus_server import backfill, start_prometheus, stop
from tests.helpers.sync import usage_figures
from tests.helpers.sync_shapes import Replay, records, write_openmetrics
from webapp.model import AccountingJob, SacctJob
from webapp.report.job_rows import ListSources, list_jobs
from webapp.settings import Settings
from webapp.sources.from_settings import prometheus_from
from webapp.sources.history_data import HistorySource
from webapp.sources.live import LiveSource, Windows
from webapp.sources.prometheus import PrometheusSource, job_selector
from webapp.sources.prometheus_bulk import BulkMetrics, JobWindow, id_selector
from webapp.sources.sacct import SacctSource
from webapp.staff.data import StaffDataSource

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {s["job_id"]: s for s in json.loads(
    (ROOT / "fixtures" / "prometheus" / "sync-shapes.json").read_text())}
SHARED = "1000000"  # the id both clusters' jobs have
ALONE = {"v24": "1000001", "v26": "1000002"}  # each shape again, under an id of its own
SHAPE = {"v24": "692", "v26": "687"}  # an idle-GPU job, a busy CPU job (different figures)
NODE = "node001"  # both clusters name their node alike
SCRAPE = 5.0  # the stack's scrape interval, at which the shapes were captured
WINDOWS = Windows(gpu=60, node=60, memory=60, output=60, small_files=60)


def labelled(shape: dict, cluster: str) -> dict:
    """The shape with every series labelled as the host's Prometheus labels a target."""
    return {**shape, "series": [{**s, "labels": {**s["labels"], "cluster": cluster}}
                                for s in shape["series"]]}


@dataclasses.dataclass(frozen=True)
class Backfilled:
    url: str
    jobs: dict[tuple[str, str], tuple[AccountingJob, SacctJob]]  # (cluster, id) -> records

    def window(self, cluster: str, job_id: str) -> tuple[datetime, datetime]:
        sj = self.jobs[(cluster, job_id)][1]
        assert sj.start_time and sj.end_time
        return sj.start_time, sj.end_time


@pytest.fixture(scope="module")
def prom(tmp_path_factory) -> Iterator[Backfilled]:
    tmp = tmp_path_factory.mktemp("prom-clusters")
    t0 = (int(time.time()) - 3 * 3600) // 60 * 60
    replays = {(c, j): Replay(j, labelled(SHAPES[SHAPE[c]], c), t0, NODE)
               for c in SHAPE for j in (SHARED, ALONE[c])}
    write_openmetrics(tmp / "history.om", list(replays.values()))
    backfill(tmp / "history.om", tmp / "data")
    port = free_port()
    proc = start_prometheus(tmp, tmp / "data", port=port)
    try:
        yield Backfilled(f"http://127.0.0.1:{port}",
                         {key: records(r, key[0]) for key, r in replays.items()})
    finally:
        stop(proc)


def source(url: str, cluster: str, label: str = "") -> PrometheusSource:
    """What the settings open for ``cluster`` (with JOBREPORT_PROMETHEUS_CLUSTER_LABEL)."""
    return prometheus_from(Settings.from_env({
        "JOBREPORT_CONFIG": "", "JOBREPORT_CLUSTER": cluster, "JOBREPORT_PROMETHEUS_URL": url,
        "JOBREPORT_SCRAPE_INTERVAL": str(SCRAPE),
        "JOBREPORT_PROMETHEUS_CLUSTER_LABEL": label}))


def bare(u: object) -> object:
    """A reading without the PromQL it sent (which names the ids and the cluster)."""
    return dataclasses.replace(u, queries=())  # type: ignore[type-var]


@pytest.mark.parametrize("cluster", ["v24", "v26"])
def test_each_cluster_reads_its_own_job_under_a_shared_id(prom, cluster):
    mine = source(prom.url, cluster, label="cluster")
    alone = source(prom.url, cluster)  # its job under an id nobody else has
    start, end = prom.window(cluster, SHARED)
    got = mine.usage(SHARED, start, end, (NODE,))
    assert got.memory_rss and got.cpu_cores
    assert bare(got) == bare(alone.usage(ALONE[cluster], start, end, (NODE,)))
    assert bool(got.gpu_utilization) == (cluster == "v24")  # the GPU job is v24's
    assert bare(mine.coverage(SHARED, start, end, (NODE,))) == \
        bare(alone.coverage(ALONE[cluster], start, end, (NODE,)))
    windows = [JobWindow(SHARED, start.timestamp(), end.timestamp(), (NODE,))]
    reader = BulkMetrics(mine)
    bulk = reader.fetch(windows)[SHARED]
    # the samples' coverage the sync reads in bulk is the job's own, its PromQL included
    assert reader.coverages[SHARED] == mine.coverage(SHARED, start, end, (NODE,))
    assert bulk == BulkMetrics(alone).fetch([dataclasses.replace(
        windows[0], job_id=ALONE[cluster])])[ALONE[cluster]]
    assert bulk.memory_max_usage_bytes == got.memory_max_usage_bytes
    # The sync's bulk read gives every figure the job's own read gives (the series differ
    # by their step only): waits, pressure, energy per node and per GPU, the GPUs.
    assert usage_figures(bulk) == usage_figures(got)
    job = prom.jobs[(cluster, SHARED)][0]
    now = end.timestamp() + SCRAPE
    live = LiveSource(mine).sample(job, now, WINDOWS)
    assert live.memory_held
    assert dataclasses.replace(live, job=job) == dataclasses.replace(
        LiveSource(alone).sample(prom.jobs[(cluster, ALONE[cluster])][0], now, WINDOWS),
        job=job)


def test_without_the_label_the_queries_are_todays_and_the_jobs_mix(prom):
    start, end = prom.window("v24", SHARED)
    unset = source(prom.url, "v24")
    mixed = unset.usage(SHARED, start, end, (NODE,))
    # The queries of a source opened as before this setting existed, word for word.
    assert mixed.queries == PrometheusSource(prom.url, scrape_interval=SCRAPE).usage(
        SHARED, start, end, (NODE,)).queries
    assert not any("cluster" in q for _, q in mixed.queries)
    # Both clusters' series under the one id add up: why the label is needed.
    one = {c: source(prom.url, c, "cluster").usage(SHARED, start, end, (NODE,))
           for c in SHAPE}
    assert one["v24"].memory_max_usage_bytes != one["v26"].memory_max_usage_bytes
    assert mixed.memory_max_usage_bytes == (one["v24"].memory_max_usage_bytes
                                            + one["v26"].memory_max_usage_bytes)


def test_a_cluster_without_series_of_the_id_reads_none(prom):
    start, end = prom.window("v24", ALONE["v24"])
    other = source(prom.url, "v26", label="cluster").usage(ALONE["v24"], start, end, (NODE,))
    assert other.empty
    assert not source(prom.url, "v24", label="cluster").usage(
        ALONE["v24"], start, end, (NODE,)).empty


# -- every reader's queries name the cluster: no Prometheus, the PromQL itself ----------
class Recording(requests.Session):
    """Answers every query with no series; keeps the PromQL asked."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def get(self, url, params=None, **kwargs):  # noqa: ANN001, ANN003, ANN201
        self.queries.append(params["query"])
        resp = requests.Response()
        resp.status_code = 200
        kind = "matrix" if url.endswith("query_range") else "vector"
        resp._content = json.dumps(  # noqa: SLF001 - a canned answer
            {"status": "success", "data": {"resultType": kind, "result": []}}).encode()
        return resp


JOBS_METRIC = re.compile(r"\bjobs_[a-z0-9_]+")


def unscoped(queries: list[str], matcher: str) -> list[str]:
    """Each ``jobs_*`` selector among ``queries`` whose braces lack ``matcher``."""
    out = []
    for q in queries:
        for m in JOBS_METRIC.finditer(q):
            braces = re.match(r"\{[^}]*\}", q[m.end():])
            if braces is None or matcher not in braces.group(0):
                out.append(f"{m.group(0)} in {q}")
    return out


def every_reader(src: PrometheusSource) -> list[str]:
    """The PromQL of a report, its coverage, the bulk read, the watch's sample, a user's
    history, the staff report's window and a job list's GPU figures, on ``src``."""
    from tests.test_job_list import NOW, Accounting, Sacct, _acct, _sacct

    end = NOW
    start = end - timedelta(hours=1)
    src.usage("17", start, end, (NODE,))
    src.coverage("17", start, end, (NODE,))
    BulkMetrics(src).fetch([JobWindow("17", start.timestamp(), end.timestamp(), (NODE,))])
    job = _acct("17", gpus=1)
    LiveSource(src).sample(job, end.timestamp(), WINDOWS)
    sj = dataclasses.replace(_sacct("17"), gpus=1, start_time=start, end_time=end)
    history = HistorySource(SacctSource(runner=lambda argv: ""), src)
    history._prometheus([sj], end)  # noqa: SLF001 - the history's one bulk read
    StaffDataSource("sacct", src.cluster, src, runner=lambda argv: "").jobs(
        start.timestamp(), end.timestamp())
    list_jobs(ListSources(Accounting([_acct("18", gpus=1)]), Sacct([_sacct("18")]), src,
                          lambda cluster, job_id: None), start, end, user="alice")
    return src.session.queries  # type: ignore[attr-defined]


def test_every_query_of_jobs_series_names_the_cluster():
    src = PrometheusSource("http://prom", scrape_interval=SCRAPE, session=Recording(),
                           cluster_label="cluster", cluster="v24")
    queries = every_reader(src)
    assert len(queries) > 30
    assert unscoped(queries, 'cluster="v24"') == []
    # slurm-exporter's series keep the exporter's own cluster label: untouched
    assert any("slurm_job_pending_info{cluster=" in q for q in queries)


def test_without_the_label_no_query_names_a_cluster_label_of_jobs_series():
    queries = every_reader(PrometheusSource("http://prom", scrape_interval=SCRAPE,
                                            session=Recording(), cluster="v24"))
    assert not [q for q in queries if "jobs_" in q and 'cluster="v24"' in q]


def test_selectors_quote_the_cluster():
    assert job_selector("1") == 'jobid="1"'
    assert job_selector("1", cluster_label="cluster", cluster='v"24') == \
        'jobid="1",cluster="v\\"24"'
    assert job_selector("1", ["n1"], "instance", "site", "v24") == \
        'jobid="1",instance=~"(n1)(:[0-9]+)?",site="v24"'
    assert id_selector(["2", "1"]) == 'jobid=~"(1|2)"'
    assert id_selector(["1"], "cluster", "v26") == 'jobid=~"(1)",cluster="v26"'
