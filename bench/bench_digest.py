"""The weekly digests of every user of a large site's week, from the archive (not a test;
needs no stack, no root).

For each size in ``--jobs`` it fills a fresh SQLite archive with that many archived
reports of ``--users`` users (``scale_archive.fill_reports``: the generator's jobs as the
sync archives them; ``user0000`` has 2,000), then, in a fresh process per measurement
(peak RSS is that process'), times ``--runs`` rounds of ``send_digests`` as the weekly
timer runs it ("send": every user's digest built from the archive and rendered by
``RENDER_PROCESSES`` worker processes into an outbox of its own, a fresh one each round,
nothing delivered), the same rendered in one process ("send1"), and the build alone; the
CPU time counts the workers'. ``--before`` also times, at 100,000 jobs at most, an older
way: the whole week read at once, series and all, then grouped by user.

    .venv/bin/python bench/bench_digest.py [--jobs 10000,100000,700000] [--runs 5]
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
from pathlib import Path

if not __package__:  # run as a file (python bench/bench_digest.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

UNTIL = 1_800_000_000
SINCE = UNTIL - 7 * 86400


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def _settings(url: str, tmp: str):  # noqa: ANN202
    from tests.helpers.scale_archive import CLUSTER
    from webapp.settings import Settings

    return Settings.from_env({
        "JOBREPORT_CLUSTER": CLUSTER, "JOBREPORT_ARCHIVE_URL": url,
        "JOBREPORT_OUTBOX": os.path.join(tmp, "outbox.sqlite"),
        "JOBREPORT_MAIL_TO": "{user}@example.org", "JOBREPORT_MAIL_FROM": "hpc@example.org"})


def _before(settings, archive) -> int:  # noqa: ANN001
    """The previous ``digests``: the week's records at once, grouped by user."""
    from collections import defaultdict

    from webapp.archive.mail_state import MailState
    from webapp.archive.week_sums import build_digest

    mail = MailState(archive.db)
    per_user = defaultdict(list)
    for job in archive.jobs(settings.cluster, SINCE, UNTIL):
        per_user[job.user].append(job)
    return len([build_digest(settings.cluster, u, SINCE, UNTIL + 1, jobs,
                             mail.folded(settings.cluster, u))
                for u, jobs in sorted(per_user.items())])


def measure(url: str, what: str, runs: int) -> dict:
    """Run in a child: ``what`` ``runs`` times on the archive at ``url``."""
    from webapp.archive.store import Archive
    from webapp.mail.digest_queue import RENDER_PROCESSES, digests, send_digests
    from webapp.mail.outbox import Outbox

    def cpu_now() -> float:  # this process' and its finished workers'
        own, workers = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime

    times, cpu, done = [], [], 0
    with tempfile.TemporaryDirectory(prefix="jobreport-digest-") as tmp:
        settings = _settings(url, tmp)
        archive = Archive(url)
        for i in range(runs):
            outbox = Outbox(os.path.join(tmp, f"outbox-{i}.sqlite"))
            t, c = time.perf_counter(), cpu_now()
            if what == "before":
                done = _before(settings, archive)
            elif what == "build":
                done = sum(1 for _ in digests(settings, archive, SINCE, UNTIL + 1))
            else:  # "send" as `jobreport digest` runs it, "send1" rendering in one process
                run = send_digests(settings, archive, outbox, None,  # type: ignore[arg-type]
                                   SINCE, UNTIL + 1, no_deliver=True,
                                   processes=RENDER_PROCESSES if what == "send" else 1)
                done = run.counts["queued"]
            times.append(time.perf_counter() - t)
            cpu.append(cpu_now() - c)
            outbox.close()
        archive.close()
    return {"p50": statistics.median(times), "p95": p95(times), "runs": runs,
            "cpu_p50": statistics.median(cpu), "digests": done,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(url: str, what: str, runs: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", what, "--url", url,
                          "--runs", str(runs)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="10000,100000,700000")
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--url")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.url, args.child, args.runs)))
        return 0
    from tests.helpers.scale_archive import fill_reports

    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}", flush=True)
    for n in (int(x) for x in args.jobs.split(",")):
        with tempfile.TemporaryDirectory(prefix="jobreport-digests-") as tmp:
            path = Path(tmp) / "archive.sqlite"
            t = time.perf_counter()
            fill_reports(str(path), n, args.users, until=UNTIL)
            print(f"{n:,} archived reports of {args.users:,} users: filled in "
                  f"{time.perf_counter() - t:.1f} s, {path.stat().st_size / 2**20:.0f} MiB",
                  flush=True)
            whats = ["send", "send1", "build"] + (["before"] if args.before and n <= 100_000
                                                  else [])
            for what in whats:
                r = child(str(path), what, args.runs)
                print(f"  {what}: p50 {r['p50']:.2f} s, p95 {r['p95']:.2f} s, "
                      f"CPU p50 {r.get('cpu_p50', float('nan')):.2f} s, "
                      f"{r['digests']} digests, peak RSS {r['max_rss_mib']:.0f} MiB "
                      f"(target all users <= 60 s); load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
