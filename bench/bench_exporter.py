"""Benchmark of one jobs-exporter scrape on real cgroup v1 jobs (not a test; run as root).

Creates job-like cgroups under the node's real v1 hierarchy with a separate node name,
  /sys/fs/cgroup/{cpuacct,memory}/slurm_bench/uid_0/job_N/step_0/task_0 (+ cpuset at job level)
so slurmd's own slurm_<node> tree is never touched, puts sleeping processes in them and
times in-process scrapes (--node-name bench). Prints p50/p95 wall time and CPU seconds
per scrape, with and without the /proc fd cache, and the exporter's RSS after 10 and
1,000 scrapes. Everything it created is killed and removed in a finally.

    .venv/bin/python bench/bench_exporter.py [--runs 3] [--scrapes 40] [--rss-scrapes 1000]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from prometheus_client import CollectorRegistry, generate_latest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from exporter.registry import JobsCollector  # noqa: E402
from exporter.settings import Settings  # noqa: E402

CGROUP = "/sys/fs/cgroup"
NODE = "bench"
SCENARIOS = (("8 jobs x 50 processes", 8, 400), ("64 jobs, 2,000 processes", 64, 2000))


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class BenchJobs:
    """Job cgroups with sleeping processes; ``close()`` removes every trace."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.dirs: list[str] = []

    def create(self, jobs: int, processes: int) -> None:
        cpus = open(f"{CGROUP}/cpuset/cpuset.cpus").read().strip()
        mems = open(f"{CGROUP}/cpuset/cpuset.mems").read().strip()
        for controller in ("cpuacct", "memory", "cpuset"):
            self._mkdir(f"{CGROUP}/{controller}/slurm_{NODE}/uid_0")
        _write(f"{CGROUP}/cpuset/slurm_{NODE}/cpuset.cpus", cpus)
        _write(f"{CGROUP}/cpuset/slurm_{NODE}/cpuset.mems", mems)
        _write(f"{CGROUP}/cpuset/slurm_{NODE}/uid_0/cpuset.cpus", cpus)
        _write(f"{CGROUP}/cpuset/slurm_{NODE}/uid_0/cpuset.mems", mems)
        for j in range(jobs):
            job = f"slurm_{NODE}/uid_0/job_{900000 + j}"
            self._mkdir(f"{CGROUP}/cpuset/{job}")
            _write(f"{CGROUP}/cpuset/{job}/cpuset.cpus", cpus)
            _write(f"{CGROUP}/cpuset/{job}/cpuset.mems", mems)
            for controller in ("cpuacct", "memory"):
                self._mkdir(f"{CGROUP}/{controller}/{job}/step_0/task_0")
        for i in range(processes):
            job = f"slurm_{NODE}/uid_0/job_{900000 + i % jobs}"
            proc = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
            self.procs.append(proc)
            for controller in ("cpuacct", "memory"):
                _write(f"{CGROUP}/{controller}/{job}/step_0/task_0/cgroup.procs", str(proc.pid))

    def _mkdir(self, path: str) -> None:
        parts = path[len(CGROUP) + 1 :].split("/")
        for i in range(2, len(parts) + 1):
            sub = f"{CGROUP}/{'/'.join(parts[:i])}"
            if not os.path.isdir(sub):
                os.mkdir(sub)
                self.dirs.append(sub)

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.procs.clear()
        for path in reversed(self.dirs):  # children before parents
            for _ in range(50):  # a killed task leaves its cgroup a moment later
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                print(f"could not remove {path}", file=sys.stderr)
        self.dirs.clear()


def _registry(fd_cache: bool) -> tuple[CollectorRegistry, JobsCollector]:
    collector = JobsCollector(Settings(node_name=NODE, gpus="off", fd_cache=fd_cache))
    registry = CollectorRegistry()
    registry.register(collector)
    return registry, collector


def time_scrapes(fd_cache: bool, scrapes: int, expect_jobs: int) -> tuple[float, float, float]:
    """(p50 seconds, p95 seconds, median CPU seconds) per scrape."""
    registry, collector = _registry(fd_cache)
    text = generate_latest(registry).decode()  # warm-up (fills the fd cache)
    found = text.count("jobs_info{")
    assert found == expect_jobs, f"expected {expect_jobs} jobs, scraped {found}"
    walls, cpus = [], []
    for _ in range(scrapes):
        w0, c0 = time.perf_counter(), time.process_time()
        generate_latest(registry)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    collector.procs.close()
    walls.sort()
    return walls[len(walls) // 2], walls[int(len(walls) * 0.95) - 1], statistics.median(cpus)


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (median shown)")
    parser.add_argument("--scrapes", type=int, default=40, help="timed scrapes per run")
    parser.add_argument("--rss-scrapes", type=int, default=1000)
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("needs root (creates cgroups)")
    if not os.path.isdir(f"{CGROUP}/cpuacct") or os.path.exists(f"{CGROUP}/cpuacct/slurm_{NODE}"):
        parser.error(f"needs cgroup v1 and no existing {CGROUP}/cpuacct/slurm_{NODE}")
    print(
        f"machine: {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}"
    )
    for label, jobs, processes in SCENARIOS:
        bench = BenchJobs()
        try:
            bench.create(jobs, processes)
            for fd_cache in (True, False):
                runs = [time_scrapes(fd_cache, args.scrapes, jobs) for _ in range(args.runs)]
                p50, p95, cpu = (statistics.median(r[i] for r in runs) for i in range(3))
                print(
                    f"{label:26s} fd cache {'on ' if fd_cache else 'off'}: "
                    f"p50 {p50 * 1000:6.1f} ms  p95 {p95 * 1000:6.1f} ms  "
                    f"CPU {cpu * 1000:6.1f} ms/scrape  (median of {args.runs} x {args.scrapes})"
                )
            if processes == max(p for _, _, p in SCENARIOS):
                registry, collector = _registry(True)
                for i in range(1, args.rss_scrapes + 1):
                    generate_latest(registry)
                    if i == 10:
                        after_10 = rss_kib()
                after_n = rss_kib()
                collector.procs.close()
                print(
                    f"{label:26s} RSS after 10 scrapes {after_10 / 1024:.1f} MiB, "
                    f"after {args.rss_scrapes}: {after_n / 1024:.1f} MiB"
                )
        finally:
            bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
