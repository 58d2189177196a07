"""A week of a large site from the archive: the staff report summed by the database and a
busy user's "my jobs" paged by it (not a test; needs no stack).

For each size in ``--jobs`` (default 10,000, 100,000, 700,000 jobs of ``--users``
users) it fills a fresh SQLite archive under a temporary directory with
``scale_archive.fill`` (real captured shapes, see there; ``user0000`` gets 2,000 of the
jobs), then in a fresh process per measurement (so peak RSS is that of the measurement
alone: interpreter, imports and the query) times ``--runs`` rounds of:

- the staff report over the 7 days (``build_staff_report_sql``), every table;
- page 1 of user0000's list sorted by submit time, and page 20 sorted by CPU waste (an
  expression the database computes per row), 50 rows a page;
- the staff pages' waste tables and sums (top 10 of each kind, each kind's sum) of
  user0000 and of the account acct00 (a hundred users, ~16,000 jobs);
- with ``--in-memory`` up to 100,000 jobs: the same report built the old way, from the
  jobs as Python objects (read back from the archive first, not timed).

    .venv/bin/python bench/bench_scale.py [--jobs 10000,100000,700000] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

if not __package__:  # run as a file (python bench/bench_scale.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

UNTIL = 1_800_000_000


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


EXTRA = ("jobs", "total", "cpu_hours_unused")


def measure(url: str, what: str, runs: int) -> dict:
    """Run in a child: ``what`` ``runs`` times on the archive at ``url``."""
    from tests.helpers.scale_archive import CLUSTER
    from webapp.archive.staff_rows import StaffRows, Window
    from webapp.archive.store import Archive
    from webapp.lists.job_list import ListQuery
    from webapp.lists.job_page import archive_page, archive_waste
    from webapp.staff.archived import build_staff_report_sql, staff_job
    from webapp.staff.build import build_staff_report
    from webapp.thresholds import StaffConfig, Thresholds

    archive = Archive(url)
    rows = StaffRows(archive.db)
    cfg, t = StaffConfig(large_memory_partitions=("debug",)), Thresholds()
    since, now = UNTIL - 7 * 86400, datetime.fromtimestamp(UNTIL, UTC)
    jobs = None
    if what == "in_memory":
        jobs = [staff_job(r) for r in rows.top(Window(CLUSTER, since, UNTIL), "1 = 1", (),
                                                None, None)]
    calls = {
        "staff": lambda: build_staff_report_sql(rows, CLUSTER, since, UNTIL, cfg, t, {}),
        "in_memory": lambda: build_staff_report(CLUSTER, jobs, since, UNTIL, cfg, t, {}),
        "page_submit": lambda: archive_page(archive, [CLUSTER], "user0000",
                                            ListQuery(days=7), now, page=1),
        "page_waste": lambda: archive_page(archive, [CLUSTER], "user0000",
                                           ListQuery(days=7, sort="cpu_waste"), now, page=20),
        # The staff pages' waste tables and sums (the page itself is page_submit's query).
        "staff_user_waste": lambda: archive_waste(archive, [CLUSTER], "user0000",
                                                  ListQuery(days=7), now, "user", 10),
        "staff_account_waste": lambda: archive_waste(archive, [CLUSTER], "acct00",
                                                     ListQuery(days=7), now, "account", 10),
    }
    times = []
    for _ in range(runs):
        began = time.perf_counter()  # not ``t``: the thresholds the calls read
        got = calls[what]()
        times.append(time.perf_counter() - began)
    archive.close()
    if what in ("staff", "in_memory"):
        extra = {"jobs": got.jobs}
    elif what.endswith("_waste") and what.startswith("staff"):
        extra = {"cpu_hours_unused": round(got[1]["cpu_waste"])}
    else:
        extra = {"total": got[1]}
    return {"p50": statistics.median(times), "p95": p95(times), "runs": runs,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **extra}


def child(url: str, what: str, runs: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", what, "--url", url,
                          "--runs", str(runs)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="10000,100000,700000")
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--in-memory", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--url")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.url, args.child, args.runs)))
        return 0
    from tests.helpers.scale_archive import fill

    for n in (int(x) for x in args.jobs.split(",")):
        with tempfile.TemporaryDirectory(prefix="jobreport-scale-") as tmp:
            url = f"sqlite:///{Path(tmp) / 'archive.sqlite'}"
            t = time.perf_counter()
            fill(url, n, args.users, until=UNTIL)
            filled = time.perf_counter() - t
            size = os.path.getsize(Path(tmp) / "archive.sqlite") / 2**20
            print(f"{n:,} jobs of {args.users:,} users: filled in {filled:.1f} s, "
                  f"{size:.0f} MiB", flush=True)
            whats = ["staff", "page_submit", "page_waste", "staff_user_waste",
                     "staff_account_waste"]
            if args.in_memory and n <= 100_000:
                whats.append("in_memory")
            for what in whats:
                r = child(url, what, args.runs)
                print(f"  {what}: p50 {r['p50'] * 1000:.1f} ms, p95 {r['p95'] * 1000:.1f} ms, "
                      f"peak RSS {r['max_rss_mib']:.0f} MiB "
                      f"({', '.join(f'{k} {v}' for k, v in r.items() if k in EXTRA)})",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
