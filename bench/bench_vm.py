"""What the VM clusters cost (scripts/vm-cluster; Slurm 24.11 and 26.05 on cgroup v2 under
QEMU's CPU emulation): a command through ``exec``, one scrape of the jobs-exporter running
in the VM, the cluster's slurmrestd answering one job, and the whole report of one job
built on the host (``ReportService`` aimed at the cluster), each ``--rounds`` times, with
the median and the spread. Needs the stack up (``scripts/dev-stack start``) and, per
cluster, an ended job id to report on.

    set -a; . var/jobreport.env; set +a
    .venv/bin/python bench/bench_vm.py --job v24=95 --job v26=95
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import requests

from webapp.report.service import ReportService
from webapp.settings import Settings

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "vm-cluster"


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def port(cluster: str, name: str) -> int:
    return int(subprocess.run([str(SCRIPT), "port", cluster, name], capture_output=True,
                              text=True, check=True).stdout)


def line(what: str, ms: list[float]) -> str:
    return (f"  {what:<34} median {statistics.median(ms):8.1f} ms"
            f"  (min {min(ms):.1f}, max {max(ms):.1f}, n={len(ms)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job", action="append", required=True, metavar="CLUSTER=ID",
                    help="an ended job of the cluster to report on; repeat per cluster")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    base = Settings.from_env()
    for item in args.job:
        cluster, _, job = item.partition("=")
        print(f"{cluster} (job {job}):")
        for what, ms in measure(base, cluster, job, args.rounds).items():
            print(line(what, ms))


def measure(base: Settings, cluster: str, job: str, rounds: int) -> dict[str, list[float]]:
    service = ReportService(base.for_cluster(cluster))
    service.build(job, sizing=False)  # the API probe and connections, once
    exporter = f"http://127.0.0.1:{port(cluster, 'exporter')}/metrics"
    cmd = [str(SCRIPT), "exec", cluster, "true"]
    return {
        "exec true (shared ssh connection)": [
            timed(lambda: subprocess.run(cmd, check=True)) for _ in range(rounds)],
        "jobs-exporter scrape": [
            timed(lambda: requests.get(exporter, timeout=60).raise_for_status())
            for _ in range(rounds)],
        "slurmrestd: one job and its steps": [
            timed(lambda: service.sacct.job(job)) for _ in range(rounds)],
        "report build (no #SBATCH history)": [
            timed(lambda: service.build(job, sizing=False)) for _ in range(rounds)],
    }

if __name__ == "__main__":
    main()
