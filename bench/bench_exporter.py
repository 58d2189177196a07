"""Benchmark of one jobs-exporter scrape on real cgroup v1 jobs (not a test; run as root).

Creates job-like cgroups under the node's real v1 hierarchy with a separate node name,
  /sys/fs/cgroup/{cpuacct,memory}/slurm_bench/uid_0/job_N/step_0/task_0 (+ cpuset at job level)
so slurmd's own slurm_<node> tree is never touched, puts sleeping processes in them and
times in-process scrapes (--node-name bench). Prints p50/p95 wall time and CPU seconds
per scrape (fd cache on; off too for the smaller cases), beside the Python floor for the
same processes (bench/floor_proc.py) timed in the same runs, and the scrape over HTTP
(as Prometheus asks, its parts accounted for) in those runs too, each run's HTTP p50 over
that run's floor p50 (so a machine slower for one run moves both), the processes left stale by
the scrape time budget, and the exporter's RSS after 10 and --rss-scrapes scrapes of
2,000 processes. Everything it created is killed and removed in a finally. The soft and
hard open-files limits are raised to twice 65536 (LimitNOFILE of
deploy/jobs-exporter.service), so that the floor's kept-open files and the exporter's each
fit, or as far as the hard limit allows where that is refused; the fd cache holds
(limit - 256 - cgroup files) / 4 processes.

    .venv/bin/python bench/bench_exporter.py [--runs 3] [--scrapes 40] [--rss-scrapes 1000]
        [--processes 400,2000,10000,20000] [--energy]

--energy times only scrapes with the energy collector off and on (a copy of the captured
powercap tree fixtures/exporter/energy/powercap, the node's own /proc/stat and meminfo),
alternating in the same runs, fd cache on.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from prometheus_client import CollectorRegistry, generate_latest

if not __package__:  # run as a file (python bench/bench_exporter.py): import from the checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.floor_proc import Floor, time_pass  # noqa: E402
from jobs_exporter.exposition import TextWriter  # noqa: E402
from jobs_exporter.proc_reader import fd_budget  # noqa: E402
from jobs_exporter.registry import JobsCollector  # noqa: E402
from jobs_exporter.settings import Settings  # noqa: E402

CGROUP = "/sys/fs/cgroup"
NODE = "bench"
# processes -> jobs; the 2,000-process case is the one issue figures are quoted for.
SCENARIOS = {400: 8, 2000: 64, 10000: 256, 20000: 256}
FD_CACHE_OFF_UP_TO = 2000  # reading 10,000+ processes by path is only slower
NOFILE = 65536  # LimitNOFILE of deploy/jobs-exporter.service
ENERGY_FIXTURE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures/exporter/energy/powercap"
)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class BenchJobs:
    """Job cgroups with sleeping processes; ``close()`` removes every trace."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.dirs: list[str] = []
        self.tasks: list[str] = []  # cgroup.procs of each job's task cgroup

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
        # One shell per job, moved into the job's task cgroup before it forks its sleeps
        # (children inherit the cgroup): thousands of processes in seconds.
        for j in range(jobs):
            job = f"slurm_{NODE}/uid_0/job_{900000 + j}"
            count = processes // jobs + (1 if j < processes % jobs else 0)
            script = (
                f"read go; i=1; while [ $i -lt {count} ]; do sleep 3600 & i=$((i+1)); done; "
                "exec sleep 3600"
            )
            shell = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE)
            self.procs.append(shell)
            for controller in ("cpuacct", "memory"):
                _write(f"{CGROUP}/{controller}/{job}/step_0/task_0/cgroup.procs", str(shell.pid))
            self.tasks.append(f"{CGROUP}/cpuacct/{job}/step_0/task_0/cgroup.procs")
            shell.stdin.write(b"go\n")
            shell.stdin.close()
        deadline = time.monotonic() + 120
        while len(self.pids()) < processes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(self.pids())} of {processes} processes started")
            time.sleep(0.2)

    def pids(self) -> list[int]:
        out: list[int] = []
        for path in self.tasks:
            with open(path) as f:
                out.extend(int(line) for line in f.read().split())
        return out

    def _mkdir(self, path: str) -> None:
        parts = path[len(CGROUP) + 1 :].split("/")
        for i in range(2, len(parts) + 1):
            sub = f"{CGROUP}/{'/'.join(parts[:i])}"
            if not os.path.isdir(sub):
                os.mkdir(sub)
                self.dirs.append(sub)

    def close(self) -> None:
        for _ in range(3):  # a shell may still be forking on the first pass
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs.clear()
        self.tasks.clear()
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


def _registry(
    fd_cache: bool, budget: float = 5.0, powercap: str = ""
) -> tuple[CollectorRegistry, JobsCollector]:
    settings = Settings(
        node_name=NODE, gpus="off", fd_cache=fd_cache, scrape_budget=budget,
        energy="auto" if powercap else "off", powercap_root=powercap or "/nonexistent",
        hwmon_root="/nonexistent",
    )
    collector = JobsCollector(settings)
    registry = CollectorRegistry()
    registry.register(collector)
    return registry, collector


def time_scrapes(
    fd_cache: bool, scrapes: int, expect_jobs: int, budget: float = 5.0, powercap: str = "",
    woken: bool = False,
) -> tuple[float, float, float, float]:
    """(p50 seconds, p95 seconds, median CPU seconds, most stale processes) per scrape.

    ``woken``: every process read and parsed in full at every scrape, as if each had run
    since the last one (the processes here sleep, and a sleeping process's sample is kept:
    ``ProcReader._read_kept``)."""
    registry, collector = _registry(fd_cache, budget, powercap)
    writer = TextWriter()  # what the exporter's server writes with
    text = writer.write(registry).decode()  # warm-up (fills the fd cache)
    found = text.count("jobs_info{")
    assert found == expect_jobs, f"expected {expect_jobs} jobs, scraped {found}"
    walls, cpus, stale = [], [], 0
    for _ in range(scrapes):
        if woken:
            collector.procs.forget_samples()
        w0, c0 = time.perf_counter(), time.process_time()
        writer.write(registry)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        stale = max(stale, collector.procs.stale)
    collector.close()
    walls.sort()
    p95 = walls[max(0, int(len(walls) * 0.95) - 1)]
    return walls[len(walls) // 2], p95, statistics.median(cpus), stale


# What Prometheus 2.x/3.x sends with each scrape (its default scrape_protocols), so the
# exporter answers in the format and encoding it does for the real server.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
    "version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


def time_http(scrapes: int, expect_jobs: int) -> dict[str, float]:
    """Scrapes over HTTP, as Prometheus sends them, through the exporter's own server
    (``jobs_exporter.http_server.serve``), beside the same registry's parts in process: p50
    seconds of "http" (request to last byte), "collect" (the collectors' families, no
    text), "text exposition" (the families and their text as the server writes them),
    "library text" (the same by prometheus_client's writer), "gzip
    level 1" (compressing it, as served), "exposition" and "gzip" (OpenMetrics and gzip
    level 9: what prometheus_client's own server would do), "collectors" (the
    collectors' own timings, summed from jobs_scrape_collector_duration_seconds of the
    answers) and "collector NAME" each."""
    from prometheus_client.openmetrics.exposition import (
        generate_latest as openmetrics_latest,
    )

    from jobs_exporter.http_server import serve

    registry, collector = _registry(True)
    writer = TextWriter()
    httpd = serve(registry, "127.0.0.1", 0)
    port = httpd.server_port
    headers = {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip",
               "User-Agent": "Prometheus/bench"}
    parts: dict[str, list[float]] = {k: [] for k in (
        "http", "collect", "exposition", "gzip", "collectors", "text exposition",
        "library text", "gzip level 1")}
    # The client in a process of its own, as Prometheus is: in this one it would share the
    # server's interpreter lock and count its own parsing as the server's time.
    client = subprocess.Popen(
        [sys.executable, "-c", HTTP_CLIENT, str(port), json.dumps(headers)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert client.stdin is not None and client.stdout is not None
    try:
        for i in range(scrapes + 1):
            client.stdin.write("scrape\n")
            client.stdin.flush()
            answer = json.loads(client.stdout.readline())
            took, text = answer["took"], answer["text"]
            if i == 0:  # warm-up (fills the fd cache)
                found = text.count("jobs_info{")
                assert found == expect_jobs, f"expected {expect_jobs} jobs, scraped {found}"
                continue
            parts["http"].append(took)
            each = {line.split('"')[1]: float(line.rsplit(" ", 1)[1])
                    for line in text.splitlines()
                    if line.startswith("jobs_scrape_collector_duration_seconds{")}
            parts["collectors"].append(sum(each.values()))
            for name, seconds in each.items():
                parts.setdefault(f"collector {name}", []).append(seconds)
            t = time.perf_counter()
            list(registry.collect())
            parts["collect"].append(time.perf_counter() - t)
            t = time.perf_counter()
            out = openmetrics_latest(registry)
            parts["exposition"].append(time.perf_counter() - t)
            t = time.perf_counter()
            gzip.compress(out)
            parts["gzip"].append(time.perf_counter() - t)
            t = time.perf_counter()
            generate_latest(registry)
            parts["library text"].append(time.perf_counter() - t)
            t = time.perf_counter()
            text_out = writer.write(registry)
            parts["text exposition"].append(time.perf_counter() - t)
            t = time.perf_counter()
            gzip.compress(text_out, compresslevel=1)
            parts["gzip level 1"].append(time.perf_counter() - t)
    finally:
        client.stdin.close()
        client.wait()
        httpd.shutdown()
        httpd.server_close()
        collector.close()
    return {k: statistics.median(v) for k, v in parts.items()}


# time_http's client: one GET per line on stdin; its seconds (request to last byte) and
# the decompressed text as one JSON line on stdout.
HTTP_CLIENT = """
import gzip, http.client, json, sys, time
port, headers = int(sys.argv[1]), json.loads(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # kept, as Prometheus
for _ in sys.stdin:                                                 # keeps it
    t = time.perf_counter()
    conn.request("GET", "/metrics", headers=headers)
    answer = conn.getresponse()
    body = answer.read()
    took = time.perf_counter() - t
    if answer.getheader("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    print(json.dumps({"took": took, "text": body.decode()}), flush=True)
"""


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:6.1f} ms"


def bench_scenario(processes: int, jobs: int, args: argparse.Namespace) -> None:
    label = f"{jobs} jobs, {processes:,} processes"
    bench = BenchJobs()
    floor: Floor | None = None
    try:
        started = time.monotonic()
        bench.create(jobs, processes)
        print(f"{label:28s} started in {time.monotonic() - started:.0f} s")
        pids = bench.pids()
        # Kept-open fds for every process only where the open-files limit allows it.
        keep_open = 3 * len(pids) + 256 < resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if args.energy:
            bench_energy(label, jobs, args)
            return
        floor = Floor(pids, keep_open=keep_open)
        for fd_cache in (True, False) if processes <= FD_CACHE_OFF_UP_TO else (True,):
            ours, floors = [], {name: [] for name in floor.passes()}
            https: list[dict[str, float]] = []
            woken: list[tuple[float, float, float, float]] = []
            for _ in range(args.runs):  # alternate, so all see the same noise
                ours.append(time_scrapes(fd_cache, args.scrapes, jobs))
                for name, run in floor.passes().items():
                    floors[name].append(time_pass(run, args.scrapes))
                if fd_cache:
                    https.append(time_http(args.scrapes, jobs))
                    woken.append(time_scrapes(True, args.scrapes, jobs, woken=True))
            p50, p95, cpu, _ = (statistics.median(r[i] for r in ours) for i in range(4))
            stale = max(r[3] for r in ours)
            print(
                f"{label:28s} fd cache {'on ' if fd_cache else 'off'}: p50 {_ms(p50)}  "
                f"p95 {_ms(p95)}  CPU {_ms(cpu)}/scrape  stale {stale:.0f}  "
                f"(median of {args.runs} x {args.scrapes})"
            )
            if fd_cache:
                h = {k: statistics.median(r[k] for r in https) for k in https[0]}
                base = floors.get("floor", floors["naive"])
                # each run's HTTP p50 over the floor's p50 of the same run, then the median
                ratios = [r["http"] / f[0] for r, f in zip(https, base, strict=True)]
                print(
                    f"{'':28s} HTTP as Prometheus asks: p50 {_ms(h['http'])}  "
                    f"exporter/floor {statistics.median(ratios):.2f}x (runs "
                    f"{', '.join(f'{x:.2f}' for x in ratios)}); of it collectors "
                    f"{_ms(h['collectors'])}, the rest of collect "
                    f"{_ms(max(0.0, h['collect'] - h['collectors']))}, text exposition "
                    f"{_ms(max(0.0, h['text exposition'] - h['collect']))}, gzip level 1 "
                    f"{_ms(h['gzip level 1'])}, HTTP "
                    f"{_ms(max(0.0, h['http'] - h['text exposition'] - h['gzip level 1']))}"
                )
                print(f"{'':28s} prometheus_client's own server would add: its text writer "
                      f"{_ms(h['library text'] - h['text exposition'])} more, OpenMetrics "
                      f"{_ms(max(0.0, h['exposition'] - h['text exposition']))} more, gzip "
                      f"level 9 {_ms(h['gzip'] - h['gzip level 1'])} more")
                w50 = [r[0] for r in woken]
                w_ratios = [w / f[0] for w, f in zip(w50, base, strict=True)]
                print(f"{'':28s} every process run since the last scrape (read in full): "
                      f"p50 {_ms(statistics.median(w50))}  exporter/floor "
                      f"{statistics.median(w_ratios):.2f}x in process (runs "
                      f"{', '.join(f'{x:.2f}' for x in w_ratios)})")
                slowest = sorted(((v, k.split(" ", 1)[1]) for k, v in h.items()
                                  if k.startswith("collector ")), reverse=True)
                print(f"{'':28s} collectors: " + ", ".join(
                    f"{name} {seconds * 1000:.1f}" for seconds, name in slowest) + " ms")
                for name, runs in floors.items():
                    f50 = statistics.median(r[0] for r in runs)
                    f95 = statistics.median(r[1] for r in runs)
                    print(
                        f"{'':28s} {name:12s}: p50 {_ms(f50)}  p95 {_ms(f95)}  "
                        f"exporter/{name} p50 {p50 / f50:.2f}x"
                    )
        if processes >= 10000 and args.small_budget:
            p50, p95, cpu, stale = time_scrapes(True, args.scrapes, jobs, args.small_budget)
            print(
                f"{label:28s} budget {args.small_budget:g} s: p50 {_ms(p50)}  p95 {_ms(p95)}  "
                f"CPU {_ms(cpu)}/scrape  stale up to {stale:.0f} per scrape"
            )
        if processes == 2000 and args.rss_scrapes:
            registry, collector = _registry(True)
            writer = TextWriter()
            for i in range(1, args.rss_scrapes + 1):
                writer.write(registry)
                if i == 10:
                    after_10 = rss_kib()
            after_n = rss_kib()
            collector.close()
            print(
                f"{label:28s} RSS after 10 scrapes {after_10 / 1024:.1f} MiB, "
                f"after {args.rss_scrapes}: {after_n / 1024:.1f} MiB"
            )
    finally:
        if floor is not None:
            floor.close()
        bench.close()


def bench_energy(label: str, jobs: int, args: argparse.Namespace) -> None:
    """Scrapes with the energy collector off and on, alternated in the same runs."""
    with tempfile.TemporaryDirectory() as tmp:
        powercap = shutil.copytree(ENERGY_FIXTURE, os.path.join(tmp, "powercap"))
        runs: dict[str, list] = {"off": [], "on": []}
        for _ in range(args.runs):
            runs["off"].append(time_scrapes(True, args.scrapes, jobs))
            runs["on"].append(time_scrapes(True, args.scrapes, jobs, powercap=powercap))
        p50 = {}
        for name, results in runs.items():
            p50[name], p95, cpu = (statistics.median(r[i] for r in results) for i in range(3))
            print(
                f"{label:28s} energy {name:3s}: p50 {_ms(p50[name])}  p95 {_ms(p95)}  "
                f"CPU {_ms(cpu)}/scrape  (median of {args.runs} x {args.scrapes})"
            )
        print(f"{label:28s} energy on/off p50: {p50['on'] / p50['off']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (median shown)")
    parser.add_argument("--scrapes", type=int, default=40, help="timed scrapes per run")
    parser.add_argument("--rss-scrapes", type=int, default=1000)
    parser.add_argument(
        "--small-budget",
        type=float,
        default=0.1,
        help="also time 10,000+ processes with this scrape budget in seconds (0: skip)",
    )
    parser.add_argument(
        "--processes",
        default="400,2000,10000,20000",
        help=f"comma-separated cases out of {','.join(map(str, SCENARIOS))}",
    )
    parser.add_argument("--energy", action="store_true", help="time energy off vs on only")
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("needs root (creates cgroups)")
    if not os.path.isdir(f"{CGROUP}/cpuacct") or os.path.exists(f"{CGROUP}/cpuacct/slurm_{NODE}"):
        parser.error(f"needs cgroup v1 and no existing {CGROUP}/cpuacct/slurm_{NODE}")
    cases = [int(p) for p in args.processes.split(",")]
    if any(p not in SCENARIOS for p in cases):
        parser.error(f"--processes: choose from {','.join(map(str, SCENARIOS))}")
    # Twice the unit's LimitNOFILE, hard limit included (root may raise it): the floor's
    # kept-open files and the exporter's fd cache each get what the exporter alone has
    # under systemd. Where that is refused, as far as the hard limit allows.
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (2 * NOFILE, 2 * NOFILE))
        nofile = 2 * NOFILE
    except (ValueError, OSError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        nofile = NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
    print(
        f"machine: {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}; open files limit {nofile} "
        f"(fd cache for up to {fd_budget(nofile)[0]:,} processes)"
    )
    for processes in cases:
        bench_scenario(processes, SCENARIOS[processes], args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
