"""What the history lookup (the report's ``#SBATCH`` block) adds to a report, on the stack.

Run as root from the repository, with the stack up (not a test). Picks the newest ended
job of the user and job name with the most ended jobs in the last 30 days (or ``--job``),
so the block is really computed, then times in this process, interleaved round by round
(one warm-up round first; ``--runs`` rounds):

- ``no history``: ``ReportService.build(sizing=False)``: the accounting view, sacct
  (without AllocTRES, the view gave it), Prometheus, the queue context, findings;
- ``history, cache off``: the same with the block (JOBREPORT_SIZING_CACHE_SECONDS=0): the
  history's sacct call and PromQL query run beside the build;
- ``history, cached``: the same with the default cache, warm (a page's PDF or JSON);
- ``as before``: sacct with AllocTRES and the history looked up after the build, one
  after the other (what the previous version did);
- ``no history, AllocTRES``: ``no history`` with sacct asked for AllocTRES too;
- the report's sacct call alone, with and without AllocTRES, and the history alone.

Then the same as the job's owner (``su - OWNER``, in one process, the login-node path:
sacct as the owner stands in for the view; cache off): with the block, without, and the
history after the build as before. Then ``jobreport show ID`` as the owner in a login
shell, this checkout's code: wall time of the whole command, Python's start included,
median of ``--show-runs``.
Prints p50 and p95 in ms, the machine and its load average.

    .venv/bin/python bench/bench_history.py [--runs 15] [--show-runs 7] [--job ID]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python bench/bench_history.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.every_column import EveryColumn  # noqa: E402
from webapp.model import JobId  # noqa: E402
from webapp.report.history import history  # noqa: E402
from webapp.report.service import ReportService  # noqa: E402
from webapp.settings import Settings  # noqa: E402


def pick_job(sacct: str) -> tuple[str, str, str]:
    """(job id, owner, name): the newest ended job of the most frequent (owner, name)."""
    out = subprocess.run(
        [sacct, "-X", "-n", "-P", "--allusers", "-S", "now-30days",
         "--format", "JobID,User,JobName,State"],
        capture_output=True, text=True, check=True).stdout
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 3]
    ended = [r for r in rows if r[3] == "COMPLETED" and r[0].isdigit()]
    (user, name), _ = Counter((r[1], r[2]) for r in ended).most_common(1)[0]
    job = max((r for r in ended if (r[1], r[2]) == (user, name)), key=lambda r: int(r[0]))
    return job[0], user, name


def ms(samples: list[float]) -> str:
    s = sorted(samples)
    p95 = s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]
    return f"p50 {statistics.median(s) * 1000:7.1f}  p95 {p95 * 1000:7.1f}"


def timed(f: Callable[[], object]) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def show_command(job: str) -> str:
    """``jobreport show`` on this checkout's code, as the installed command runs it (the
    system Python on the venv's packages: the venv's own interpreter may be root's)."""
    version = sysconfig.get_python_version()
    site = ROOT / ".venv" / "lib" / f"python{version}" / "site-packages"
    code = ("import site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'jobreport'; "
            "from webapp.cli import main; sys.exit(main())")
    return f"/usr/bin/python{version} -I -S -c {shlex.quote(code)} {site} show {job}"


# As the owner, in one process: what `jobreport show` runs on a login node (sacct as the
# owner stands in for the view), cache off: with the block / without / the previous
# version's order (the history after the build).
OWNER_ROUNDS = """
import dataclasses, json, statistics, sys, time
from webapp.cli.login import build_for_caller, service_for
from webapp.model import JobId
from webapp.report.history import history
from webapp.settings import Settings
job, runs = JobId.of(sys.argv[1]), int(sys.argv[2])
settings = dataclasses.replace(Settings.from_env(), sizing_cache_seconds=0)
def before():
    service, _ = service_for(settings, job)
    report = service.build(job, strict_accounting=False, archive_fallback=False, sizing=False)
    history(service.history, report.user, report.job_name, thresholds=service.thresholds)
cases = {"with history": lambda: build_for_caller(settings, job),
         "no history": lambda: build_for_caller(settings, job, sizing=False),
         "as before (history after)": before}
times = {k: [] for k in cases}
for i in range(runs + 1):
    for k, f in cases.items():
        t = time.perf_counter()
        f()
        if i:
            times[k].append(time.perf_counter() - t)
print(json.dumps(times))
"""


def owner_rounds(job: str, owner: str, runs: int) -> dict[str, list[float]]:
    version = sysconfig.get_python_version()
    site = ROOT / ".venv" / "lib" / f"python{version}" / "site-packages"
    code = "import site, sys; site.addsitedir(sys.argv.pop(1)); " + OWNER_ROUNDS
    cmd = (f"/usr/bin/python{version} -I -S -c {shlex.quote(code)} {site} "
           f"{shlex.quote(job)} {runs}")
    out = subprocess.run(["su", "-", owner, "-c", cmd], capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--show-runs", type=int, default=7)
    ap.add_argument("--job", help="job id (default: see the module's docstring)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("run as root (it reads the accounting view and runs su)", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    if args.job:
        acct = ReportService(settings).accounting.job(JobId.of(args.job))
        job, owner, name = args.job, acct.user or "", acct.job_name or ""
    else:
        job, owner, name = pick_job(settings.sacct)

    plain = ReportService(settings)
    no_cache = ReportService(dataclasses.replace(settings, sizing_cache_seconds=0))
    cached = ReportService(settings)  # the default cache, warm after the warm-up round
    before = ReportService(settings, sacct=EveryColumn(plain.sacct),  # type: ignore[arg-type]
                           prometheus=plain.prometheus)
    assert plain.history is not None
    source = plain.history

    def as_before() -> None:
        report = before.build(job, sizing=False, archive_fallback=False)
        history(source, report.user, report.job_name, thresholds=plain.thresholds)

    found = history(source, owner, name, thresholds=plain.thresholds)
    report = no_cache.build(job, archive_fallback=False)
    print(f"job {job} of {owner}, named {name!r}: {len(found.jobs)} jobs of that name in 30 "
          f"days; block: {' '.join(report.sizing.lines()) if report.sizing else 'none'}")
    cases: dict[str, Callable[[], object]] = {
        "no history": lambda: plain.build(job, sizing=False, archive_fallback=False),
        "history, cache off": lambda: no_cache.build(job, archive_fallback=False),
        "history, cached": lambda: cached.build(job, archive_fallback=False),
        "as before (AllocTRES, history after)": as_before,
        "no history, AllocTRES": lambda: before.build(job, sizing=False, archive_fallback=False),
        "sacct: the report's call": lambda: plain.sacct.job_figures(job),  # type: ignore[attr-defined]
        "sacct: with AllocTRES": lambda: plain.sacct.job(job),
        "history alone": lambda: history(source, owner, name, thresholds=plain.thresholds),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for f in cases.values():  # warm-up: connections, caches, imports
        f()
    for _ in range(args.runs):
        for k, f in cases.items():
            times[k].append(timed(f))
    load = os.getloadavg()
    print(f"\nin-process, {args.runs} rounds interleaved (ms):")
    for k, v in times.items():
        print(f"  {k:<40} {ms(v)}")

    print(f"\nbuilt as {owner} in one process (sacct as {owner}, no view; cache off), "
          f"{args.runs} rounds interleaved (ms):")
    for k, v in owner_rounds(job, owner, args.runs).items():
        print(f"  {k:<40} {ms(v)}")

    cmd = ["su", "-", owner, "-c", show_command(job)]
    walls = []
    for _ in range(args.show_runs + 1):
        t = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        walls.append(time.perf_counter() - t)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
    has_block = "#SBATCH" in out.stdout
    print(f"\n`jobreport show {job}` as {owner} (login shell, whole command), "
          f"{args.show_runs} runs after one warm-up: {ms(walls[1:])} "
          f"(block {'shown' if has_block else 'not shown'})")
    print(f"\nmachine: {os.cpu_count()} CPUs, {platform.platform()}, Python "
          f"{platform.python_version()}; load average {load[0]:.2f} / {os.getloadavg()[0]:.2f} "
          "(after the in-process rounds / at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
