"""What slurmrestd saves (or costs) per web report against forking sacct, on the stack.

For each job: the jobs-and-steps read alone (``SacctSource.job_figures`` as a report with
the accounting view calls it, ``SacctSource.job``, ``SlurmrestdSource.job``) and the whole
report build with each source, interleaved, ``--rounds`` times; medians in ms. Also
checks the two reports are equal (the build's figures, not only the timing).

    set -a; . var/jobreport.env; set +a
    .venv/bin/python bench/bench_slurmrestd.py --url unix:/path/restd.sock 13 37 12
    .venv/bin/python bench/bench_slurmrestd.py --url http://127.0.0.1:6820 \
        --token-file var/slurmrestd.jwt --user slurm 13 37 12
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

from webapp.report.service import ReportService
from webapp.settings import Settings


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jobs", nargs="+")
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", default="")
    ap.add_argument("--user", default="")
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args()
    base = Settings.from_env()
    rest = dataclasses.replace(base, sacct_source="slurmrestd", slurmrestd_url=args.url,
                               slurmrestd_token_file=args.token_file,
                               slurmrestd_user=args.user, sizing_cache_seconds=0)
    base = dataclasses.replace(base, sizing_cache_seconds=0)
    a, b = ReportService(base), ReportService(rest)
    cli, api = a.sacct, b.sacct
    for job in args.jobs:
        ra, rb = a.build(job), b.build(job)
        differ = [f.name for f in dataclasses.fields(ra)
                  if getattr(ra, f.name) != getattr(rb, f.name)]
        calls: dict[str, Callable[[], object]] = {
            "sacct figures": lambda j=job: cli.job_figures(j),  # type: ignore[attr-defined]
            "sacct job": lambda j=job: cli.job(j),
            "slurmrestd job": lambda j=job: api.job(j),
            "report sacct": lambda j=job: a.build(j),
            "report slurmrestd": lambda j=job: b.build(j),
        }
        times: dict[str, list[float]] = {k: [] for k in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                times[name].append(timed(call))
        medians = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in times.items())
        print(f"job {job}: {medians} ms; reports differ in: {differ or 'nothing'}")

if __name__ == "__main__":
    main()
