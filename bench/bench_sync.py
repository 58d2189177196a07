"""`jobreport sync` archiving 10,000 ended jobs, and a report rebuilt from the archive (not
a test; run as root beside the stack, which it never touches).

Replays real job shapes captured on the local stack (fixtures/prometheus/sync-shapes.json,
see tests/helpers/sync_shapes.py) as ``--jobs`` jobs, one starting every ``--gap`` seconds over
the last day on 100 nodes, backfills them with ``promtool tsdb create-blocks-from
openmetrics`` into a Prometheus of its own on a free loopback port (admin API on, for the
second half), then runs the sync's archive direction over all of them into a fresh
SQLite archive: the bulk queries against that Prometheus, the accounting and sacct
records from fixed in-process readers (these jobs exist in no slurmdbd). Then deletes
every series and times ``ReportService.build`` of archived jobs, which now read "no data"
from Prometheus and rebuild from the archive. Prints medians of ``--runs`` runs.

    .venv/bin/python bench/bench_sync.py [--jobs 10000] [--gap 9] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests
from tqdm import tqdm

if not __package__:  # run as a file (python bench/bench_sync.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.prometheus_server import backfill, start_prometheus, stop  # noqa: E402
from tests.helpers.sync_shapes import Replay, records, replays, write_openmetrics  # noqa: E402
from webapp.archive.store import Archive  # noqa: E402
from webapp.model import JobNotFound  # noqa: E402
from webapp.report.service import ReportService  # noqa: E402
from webapp.settings import Settings  # noqa: E402
from webapp.sources.ended import EndedJob  # noqa: E402
from webapp.sync.options import SyncOptions  # noqa: E402
from webapp.sync.run import Syncer  # noqa: E402

SHAPES = Path(__file__).resolve().parent.parent / "fixtures/prometheus/sync-shapes.json"
CLUSTER = "bench"


class FixedAccounting:
    """The replayed jobs' accounting records (an AccountingReader over a dict)."""

    def __init__(self, jobs: list[Replay]) -> None:
        self.records = {}
        self.sacct = {}
        for job in jobs:
            self.records[job.job_id], self.sacct[job.job_id] = records(job, CLUSTER)

    def job(self, job_id):  # noqa: ANN001, ANN201
        try:
            return self.records[str(job_id)]
        except KeyError:
            raise JobNotFound(str(job_id)) from None

    def jobs(self, ids, submitted=None):  # noqa: ANN001, ANN201 - one record per id here
        return {i: self.records[i] for i in ids if i in self.records}

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        out = sorted(EndedJob(int(a.end_time.timestamp()), a.job_id,
                              int(a.submit_time.timestamp()), CLUSTER)
                     for a in self.records.values())
        return [j for j in out if since <= j.end_time <= until][:limit]

    def ended_since(self, since):  # noqa: ANN001, ANN201
        return []

    def requested_gpu_types(self, job_id):  # noqa: ANN001, ANN201
        return ()

    def time_limits(self, partition, since):  # noqa: ANN001, ANN201
        return {600.0: len(self.records)}


class FixedSacct:
    def __init__(self, records: dict) -> None:
        self.records = records

    def job(self, job_id):  # noqa: ANN001, ANN201
        return self.records[str(job_id)]

    def jobs(self, ids):  # noqa: ANN001, ANN201
        return {i: self.records[i] for i in ids if i in self.records}

    def array(self, job_id):  # noqa: ANN001, ANN201
        raise JobNotFound(str(job_id))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def requests_served(url: str) -> int:
    text = requests.get(f"{url}/metrics", timeout=10).text
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("prometheus_http_requests_total{")
                   and 'handler="/api/v1/query' in line))


def settings(url: str, archive: str) -> Settings:
    env = {"JOBREPORT_PROMETHEUS_URL": url, "JOBREPORT_SCRAPE_INTERVAL": "5",
           "JOBREPORT_CLUSTER": CLUSTER, "JOBREPORT_ARCHIVE_URL": archive,
           "JOBREPORT_DB_URL": "mysql://nobody@127.0.0.1:1/none", "JOBREPORT_SACCT": "false",
           "JOBREPORT_SECRET_KEY": "bench", "JOBREPORT_OUTBOX": archive + ".outbox"}
    return Settings.from_env(env)


def sync_once(url: str, tmp: Path, acct: FixedAccounting, n: int) -> tuple[float, int, Path]:
    db = tmp / f"archive-{time.monotonic_ns()}.sqlite"
    s = settings(url, str(db))
    service = ReportService(s, accounting=acct, sacct=FixedSacct(acct.sacct))
    syncer = Syncer(s, service=service)
    before = requests_served(url)
    t = time.perf_counter()
    result = syncer.run(SyncOptions(direction="archive", limit=n, max_span=3 * 86400))
    took = time.perf_counter() - t
    syncer.close()
    done = result.outcomes["archive"]["archived"]
    if done != n or result.error:
        raise SystemExit(f"archived {done} of {n} ({result.error})")
    return took, requests_served(url) - before, db


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--gap", type=float, default=9.0, help="seconds between job starts")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    import json
    shapes = json.loads(SHAPES.read_text())
    t0 = int(time.time() - args.jobs * args.gap - 3600) // 60 * 60
    jobs = replays(shapes, args.jobs, t0, args.gap)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    proc = None
    try:
        t = time.perf_counter()
        samples = write_openmetrics(tmp / "history.om", jobs)
        backfill(tmp / "history.om", tmp / "data")
        print(f"backfilled {args.jobs} jobs, {samples} samples in {time.perf_counter() - t:.0f} s")
        port = free_port()
        proc = start_prometheus(tmp, tmp / "data", port=port, admin=True)
        url = f"http://127.0.0.1:{port}"
        acct = FixedAccounting(jobs)
        runs = []
        for _ in range(args.runs):
            runs.append(sync_once(url, tmp, acct, args.jobs))
            print(f"sync: {runs[-1][0]:.1f} s, {runs[-1][1]} Prometheus requests")
        db = runs[-1][2]
        requests.post(f"{url}/api/v1/admin/tsdb/delete_series",
                      params={"match[]": '{__name__=~"jobs_.+"}'}, timeout=60).raise_for_status()
        s = settings(url, str(db))
        service = ReportService(s, accounting=acct, sacct=FixedSacct(acct.sacct))
        times = []
        for job in tqdm(jobs[:: max(1, args.jobs // 200)], desc="from archive", disable=None):
            t = time.perf_counter()
            report = service.build(job.job_id)
            times.append((time.perf_counter() - t) * 1000)
            assert any(g.source == "archive" for g in report.gaps), job.job_id
        with Archive(str(db)) as archive:
            t = time.perf_counter()
            for job in jobs[:200]:
                archive.get(CLUSTER, job.job_id)
            read_ms = (time.perf_counter() - t) * 1000 / 200
        print(f"machine: {platform.node()} {os.cpu_count()} CPUs, load {os.getloadavg()}")
        print(f"sync of {args.jobs} jobs: median {statistics.median(r[0] for r in runs):.1f} s "
              f"of {args.runs} (target <= 60 s), {runs[-1][1]} Prometheus requests; "
              f"archive {db.stat().st_size / 2**20:.0f} MiB")
        print(f"report from the archive (ReportService.build, Prometheus empty): p50 "
              f"{statistics.median(times):.1f} ms, p95 "
              f"{statistics.quantiles(times, n=20)[-1]:.1f} ms (target <= 50 ms); "
              f"archive row read {read_ms:.2f} ms")
    finally:
        stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
