"""Run time of `jobreport watch --dry-run` and of the staff report on the local stack
(not a test): the stack's settings, its Prometheus and sacct, whatever jobs it holds.
One warm-up, then ``--runs`` runs each; prints the median and the spread, the number of
jobs, and the machine with its load average (a shared machine makes figures noisy).

    set -a; . var/jobreport.env; set +a
    .venv/bin/python bench/bench_watch_staff.py [--runs 5] [--days 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from dataclasses import replace

from webapp.settings import Settings
from webapp.staff.service import staff_report
from webapp.watch.run import Watcher


def timed(fn, runs: int) -> tuple[list[float], object]:
    result = fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--days", type=float, default=7.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = replace(Settings.from_env(), outbox=os.path.join(tmp, "outbox.sqlite"))
        watcher = Watcher(settings)
        w_times, w = timed(lambda: watcher.run(dry_run=True), args.runs)
        s_times, s = timed(lambda: staff_report(settings, days=args.days), args.runs)
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"watch --dry-run: {w.jobs} running jobs, median {statistics.median(w_times):.3f} s "
          f"(min {min(w_times):.3f}, max {max(w_times):.3f}, {args.runs} runs)")
    print(f"staff-report --days {args.days:g}: {s.jobs} jobs, median "
          f"{statistics.median(s_times):.3f} s (min {min(s_times):.3f}, max {max(s_times):.3f})")


if __name__ == "__main__":
    main()
