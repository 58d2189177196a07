"""Sync lag at 100,000 jobs a day: jobs end one a second and `jobreport sync` archives
them; how long after its end is each job archived (not a test; no stack, no root).

The jobs are the real shapes ``bench_sync.py`` replays (``sync_shapes``: the stack's
captured jobs, their sacct records and raw series), one starting every ``--gap`` seconds
(1 s: 86,400 a day), backfilled with promtool into a Prometheus of its own on a free
loopback port. Their series lie an hour in the past; the bench replays that hour in real
time: a virtual clock starts at the first job's start, the accounting reader answers only
the jobs that have ended by it, and the sync runs with it as its ``now``. Each run is the
sync's own code path (``Syncer.run``, archive direction, ``--limit 200``: its bulk queries
against that Prometheus, the report of each job, the archive and staff row writes) into a
fresh SQLite archive, as a new ``Syncer`` each time, after a new interpreter has imported
the sync's modules (what each run's process start costs; ``--no-process-start`` leaves
that out). Runs start:

- ``--every 60``: on the minute, as the timer starts them;
- ``--every 0``: each as soon as the last ended, as the epilog's nudge keeps it going when
  a job ends every second.

A job's lag is its archive time (the record's ``archived_at``) on the virtual clock minus
its end. After ``--minutes`` of arrivals the runs go on until every job is archived.
Prints the lag's p50/p95/p99/max and each run's length. Target: p99 <= 60 s.

    .venv/bin/python bench/bench_sync_lag.py [--minutes 10] [--every 0] [--every 60]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a file (python bench/bench_sync_lag.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_sync import SHAPES, FixedAccounting, FixedSacct, free_port, settings  # noqa: E402
from tests.helpers.prometheus_server import backfill, start_prometheus, stop  # noqa: E402
from tests.helpers.sync_shapes import replays, write_openmetrics  # noqa: E402
from webapp.archive.store import Archive  # noqa: E402
from webapp.report.service import ReportService  # noqa: E402
from webapp.sync.options import SyncOptions  # noqa: E402
from webapp.sync.run import Syncer  # noqa: E402

TARGET_P99 = 60.0
START = "import webapp.cli, webapp.cli.sync, webapp.sync.run"  # a run's process start


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def replay(url: str, db: Path, acct: FixedAccounting, v0: float, last_end: int,
           every: float, process_start: bool) -> tuple[list[float], list[float]]:
    """Run syncs on the virtual clock until every job is archived: (lags, run lengths)."""
    w0 = time.monotonic()

    def now() -> float:
        return v0 + (time.monotonic() - w0)

    s = settings(url, str(db))
    runs: list[float] = []
    first = True
    while True:
        t = time.perf_counter()
        if process_start:
            subprocess.run([sys.executable, "-c", START], check=True)
        service = ReportService(s, accounting=acct, sacct=FixedSacct(acct.sacct))
        syncer = Syncer(s, service=service)
        try:
            # The first run starts the watermark at the replay's start, not a week back.
            span = max(1, int(now() - v0) + 1) if first else 7 * 86400
            result = syncer.run(SyncOptions(direction="archive", limit=200, max_span=span),
                                clock=now)
        finally:
            syncer.close()
        first = False
        runs.append(time.perf_counter() - t)
        if result.error or result.failed:
            raise SystemExit(f"sync failed: {result.error or result.failed[0]}")
        mark = result.watermarks.get("archive")
        if mark is not None and mark >= last_end:
            break
        if every:
            time.sleep(max(0.0, every - (now() - v0) % every))
        elif not result.selected:
            time.sleep(0.5)  # nothing ended yet: the next end nudges a new run
    wall_to_virtual = v0 - (time.time() - (time.monotonic() - w0))
    with Archive(str(db)) as archive:
        rows = archive.db.query("SELECT end_time, archived_at FROM archive_jobs")
    return [at + wall_to_virtual - end for end, at in rows], runs


def measure(minutes: float, gap: float, modes: list[float], process_start: bool,
            say=print) -> dict[float, tuple[list[float], list[float]]]:  # noqa: ANN001
    """Jobs ending every ``gap`` s for ``minutes``, archived by runs every ``mode`` s (0:
    back to back) on the virtual clock: per mode, (each job's lag, each run's length)."""
    n = int(minutes * 60 / gap)
    shapes = json.loads(SHAPES.read_text())
    t0 = int(time.time() - n * gap - 3600) // 60 * 60
    jobs = replays(shapes, n, t0, gap)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sync-lag-"))
    proc = None
    out = {}
    try:
        t = time.perf_counter()
        samples = write_openmetrics(tmp / "history.om", jobs)
        backfill(tmp / "history.om", tmp / "data")
        say(f"{n} jobs, one every {gap:g} s, {samples} samples backfilled in "
            f"{time.perf_counter() - t:.0f} s")
        port = free_port()
        proc = start_prometheus(tmp, tmp / "data", port=port)
        url = f"http://127.0.0.1:{port}"
        acct = FixedAccounting(jobs)
        ends = sorted(int(a.end_time.timestamp()) for a in acct.records.values())
        say(f"load average before: {os.getloadavg()}")
        for every in modes:
            lags, runs = replay(url, tmp / f"archive-{every:g}.sqlite", acct, float(t0),
                                ends[-1], every, process_start)
            assert len(lags) == n, f"archived {len(lags)} of {n}"
            how = "back to back (nudged)" if not every else f"every {every:g} s (timer)"
            say(f"runs {how}: {len(runs)} runs, run length p50 "
                f"{statistics.median(runs):.1f} s, max {max(runs):.1f} s; lag p50 "
                f"{pct(lags, .5):.1f} s, p95 {pct(lags, .95):.1f} s, p99 "
                f"{pct(lags, .99):.1f} s, max {max(lags):.1f} s (target p99 <= "
                f"{TARGET_P99:.0f} s); load average {os.getloadavg()[0]:.1f}")
            out[every] = (lags, runs)
    finally:
        stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--gap", type=float, default=1.0, help="seconds between job starts")
    ap.add_argument("--every", type=float, action="append",
                    help="seconds between run starts (0: back to back); repeatable")
    ap.add_argument("--no-process-start", action="store_true")
    args = ap.parse_args()
    measure(args.minutes, args.gap, args.every or [0.0, 60.0], not args.no_process_start,
            say=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
