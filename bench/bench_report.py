"""Report build time for a long, wide job against a real Prometheus (not a test; run as root).

Writes OpenMetrics history for one synthetic job -- 7 days on 8 nodes at 30 s resolution,
32 cores per node, 28 of them busy -- with the exporter's metric names, types and labels
(plus the ``instance``/``job`` labels a scrape adds), backfills it with
``promtool tsdb create-blocks-from openmetrics`` into a temporary data directory and starts
a separate Prometheus on 127.0.0.1:19090 (no scrape targets; the stack's Prometheus on
9090 is never touched). Then times ``build_report`` (PrometheusSource on that server,
fixed accounting and sacct records) + ``detect_all`` + the text or JSON renderer: one
warm-up, then ``--runs`` runs each; prints p50/p95, the HTTP requests, series and points
fetched, a breakdown (build only, each renderer alone, gzip answers as a remote Prometheus
sends them) and the machine with its load average (a shared machine makes figures noisy).
The Prometheus process and the temporary directory are removed in a finally.

    .venv/bin/python bench/bench_report.py [--runs 9] [--days 7] [--nodes 8] [--cores 32]
        [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import itertools
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import requests

if not __package__:  # run as a file (python bench/bench_report.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.prometheus_before import differences, figures_before  # noqa: E402
from tests.helpers.prometheus_server import backfill, port_free, start_prometheus, stop  # noqa: E402
from webapp.detectors import Thresholds, detect_all  # noqa: E402
from webapp.model import AccountingJob, JobId, JobReport, SacctJob, Step  # noqa: E402
from webapp.renderers import json as json_renderer  # noqa: E402
from webapp.renderers import text as text_renderer  # noqa: E402
from webapp.report.build import build_report  # noqa: E402
from webapp.sources.prometheus import MAX_WORKERS, PrometheusSource  # noqa: E402

JOB_ID = "900001"
PORT = 19090
INTERVAL = 30
TARGETS_MS = {"text": 120.0, "json": 150.0}  # p50, build + render
BUSY_CORES = 28
GIB = 1024**3
EXPORTER_PORT = 9306  # what a scrape puts in ``instance``: node01:9306
SCRAPE_JOB = "jobs-exporter"  # deploy/prometheus-jobs-exporter.yml's job_name
# With --storage.tsdb.retention.time=30d Prometheus compacts blocks up to 10 % of the
# retention (3 days), i.e. 54 h blocks: backfill into the same block sizes.
MAX_BLOCK = "72h"


# --- history ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Shape:
    nodes: int
    cores: int
    days: float
    start: int  # unix seconds, a multiple of INTERVAL
    end: int

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"node{i + 1:02d}" for i in range(self.nodes))

    @property
    def samples(self) -> int:
        return (self.end - self.start) // INTERVAL + 1


def _lines(out, name: str, labels: str, values, ts: list[str], fmt: str) -> int:
    """One series: ``name{labels} value ts`` for each sample, in time order."""
    prefix = f"{name}{{{labels}}} "
    out.write("".join(f"{prefix}{v:{fmt}} {t}\n" for v, t in zip(values.tolist(), ts, strict=True)))
    return len(ts)


def write_openmetrics(path: Path, shape: Shape, seed: int = 1) -> tuple[int, int]:
    """The job's history as OpenMetrics text; returns (series, samples).

    Families are written one after another (OpenMetrics forbids interleaving them), each
    series' samples in time order; counters are declared without ``_total`` in the TYPE
    line and sampled with it, as OpenMetrics requires.
    """
    rng = np.random.default_rng(seed)
    n = shape.samples
    ts = [str(shape.start + i * INTERVAL) for i in range(n)]
    hours = np.arange(n) * INTERVAL / 3600.0
    job = f'jobid="{JOB_ID}"'

    def target(node: str) -> str:
        return f'instance="{node}:{EXPORTER_PORT}",job="{SCRAPE_JOB}"'

    # Per node: per-core busy fraction (28 busy cores around 97 %, 4 nearly idle), a short
    # serial start-up, and a slow day/night wobble of the busy cores.
    per_core: dict[str, np.ndarray] = {}
    for node in shape.node_names:
        busy = np.clip(
            rng.normal(0.97, 0.02, (shape.cores, n)) - 0.03 * np.sin(hours / 24 * 2 * np.pi),
            0,
            1,
        )
        busy[BUSY_CORES:] = np.abs(rng.normal(0.004, 0.002, (shape.cores - BUSY_CORES, n)))
        busy[1:, :20] = 0.001  # first ten minutes: one core reads the input
        per_core[node] = busy
    series = samples = 0

    def family(out, name: str, kind: str, help_: str) -> None:
        base = name.removesuffix("_total") if kind == "counter" else name
        out.write(f"# HELP {base} {help_}\n# TYPE {base} {kind}\n")

    with open(path, "w", buffering=1 << 20) as out:
        family(out, "jobs_cpu_seconds_total", "counter", "CPU time by mode, in seconds.")
        for node in shape.node_names:
            total = per_core[node].sum(axis=0) * INTERVAL
            for mode, share in (("user", 0.96), ("system", 0.04)):
                values = np.cumsum(total * share)
                samples += _lines(
                    out,
                    "jobs_cpu_seconds_total",
                    f'{job},mode="{mode}",{target(node)}',
                    values,
                    ts,
                    ".3f",
                )
                series += 1
        family(out, "jobs_cpu_core_seconds_total", "counter", "CPU time per core, in seconds.")
        for node in shape.node_names:
            cum = np.cumsum(per_core[node] * INTERVAL, axis=1)
            for core in range(shape.cores):
                samples += _lines(
                    out,
                    "jobs_cpu_core_seconds_total",
                    f'core="{core}",{job},{target(node)}',
                    cum[core],
                    ts,
                    ".3f",
                )
                series += 1

        limit = 240 * GIB  # --mem=240G per node
        rss = {}
        for node in shape.node_names:
            grow = np.minimum(hours / 6, 1.0)  # fills its arrays over the first six hours
            noise = rng.normal(0, 0.01, n).cumsum() / np.sqrt(n)
            rss[node] = np.round((150 * GIB * grow + 2 * GIB) * (1 + noise) / 4096) * 4096
        gauges = (
            ("jobs_memory_rss_bytes", "Anonymous memory of the job.", lambda node: rss[node]),
            (
                "jobs_memory_limit_bytes",
                "Memory limit of the job's cgroup, in bytes.",
                lambda node: np.full(n, float(limit)),
            ),
            (
                "jobs_memory_max_usage_bytes",
                "Peak memory including page cache, in bytes.",
                lambda node: np.maximum.accumulate(rss[node] + 8 * GIB),
            ),
            (
                "jobs_processes",
                "Number of processes in the job's cgroups.",
                lambda node: np.full(n, 30.0),
            ),
            (
                "jobs_threads",
                "Number of threads of the job's processes.",
                lambda node: 30.0 + BUSY_CORES + rng.integers(0, 3, n),
            ),
            (
                "jobs_open_files",
                "Open file descriptors.",
                lambda node: 180.0 + rng.integers(0, 40, n),
            ),
        )
        opened = {}
        for name, help_, make in gauges:
            family(out, name, "gauge", help_)
            for node in shape.node_names:
                values = make(node)
                if name == "jobs_open_files":
                    opened[node] = values
                samples += _lines(out, name, f"{job},{target(node)}", values, ts, ".0f")
                series += 1
        family(out, "jobs_open_files_limit_ratio", "gauge", "Open files / soft limit (max).")
        for node in shape.node_names:
            values = opened[node] / 30 / 1024  # spread over 30 processes, limit 1024
            samples += _lines(
                out, "jobs_open_files_limit_ratio", f"{job},{target(node)}", values, ts, ".6g"
            )
            series += 1
        # I/O counters: input read at start-up, then a checkpoint every six hours.
        checkpoint = (np.arange(n) % (6 * 120) < 20).astype(float)
        counters = (
            (
                "jobs_read_bytes_total",
                "Bytes read from storage.",
                np.where(hours < 1 / 6, 40 * 2**20, 64 * 1024) * INTERVAL,
            ),
            (
                "jobs_write_bytes_total",
                "Bytes written to storage.",
                (checkpoint * 300 * 2**20 + 16 * 1024) * INTERVAL,
            ),
            (
                "jobs_read_syscalls_total",
                "Read system calls.",
                np.where(hours < 1 / 6, 40 * 2**20, 64 * 1024) * INTERVAL / 65536,
            ),
            (
                "jobs_write_syscalls_total",
                "Write system calls.",
                (checkpoint * 300 * 2**20 + 16 * 1024) * INTERVAL / 65536,
            ),
        )
        for name, help_, per_step in counters:
            family(out, name, "counter", help_)
            for node in shape.node_names:
                values = np.cumsum(np.round(per_step * rng.uniform(0.9, 1.1, n)))
                samples += _lines(out, name, f"{job},{target(node)}", values, ts, ".0f")
                series += 1
        family(out, "jobs_scratch_in_use", "gauge", "1 when the job uses scratch.")
        for node in shape.node_names:
            samples += _lines(
                out, "jobs_scratch_in_use", f"{job},{target(node)}", np.ones(n), ts, ".0f"
            )
            series += 1
        out.write("# EOF\n")
    return series, samples


# --- the report ------------------------------------------------------------------------


class FixedAccounting:
    def __init__(self, job: AccountingJob) -> None:
        self.record = job

    def job(self, job_id: JobId) -> AccountingJob:
        return self.record


class FixedSacct:
    def __init__(self, job: SacctJob) -> None:
        self.record = job

    def job(self, job_id: str) -> SacctJob:
        return self.record


def records(shape: Shape) -> tuple[AccountingJob, SacctJob]:
    start = datetime.fromtimestamp(shape.start, UTC)
    end = datetime.fromtimestamp(shape.end, UTC)
    elapsed = float(shape.end - shape.start)
    cpus = shape.nodes * shape.cores
    nodes = shape.node_names
    node_list = f"node[01-{shape.nodes:02d}]"
    mem = shape.nodes * 240 * GIB
    acct = AccountingJob(
        cluster="bench",
        job_id=JOB_ID,
        job=int(JOB_ID),
        array_job=None,
        array_task=None,
        het_job=None,
        het_offset=None,
        uid=1001,
        user="alice",
        account="physics",
        partition="long",
        job_name="climate-ensemble",
        state="COMPLETED",
        exit_code="0:0",
        submit_time=start - timedelta(minutes=12),
        start_time=start,
        end_time=end,
        cpus=cpus,
        memory_requested_bytes=mem,
        time_limit_seconds=8 * 86400.0,
        nodes=nodes,
        node_list=node_list,
        work_dir="/home/alice/climate",
        gpus=0,
    )
    steps = (
        Step(
            "batch", "batch", "COMPLETED", "0:0", elapsed, 60.0, 3 * GIB, shape.cores, nodes[:1], 1
        ),
        Step(
            "extern",
            "extern",
            "COMPLETED",
            "0:0",
            elapsed,
            0.5,
            1 * 2**20,
            cpus,
            nodes,
            shape.nodes,
        ),
        Step(
            "0",
            "model",
            "COMPLETED",
            "0:0",
            elapsed - 120,
            elapsed * BUSY_CORES * 0.96 * shape.nodes,
            152 * GIB,
            cpus,
            nodes,
            shape.nodes,
        ),
    )
    sj = SacctJob(
        job_id=JOB_ID,
        job_name="climate-ensemble",
        user="alice",
        account="physics",
        partition="long",
        state="COMPLETED",
        exit_code="0:0",
        elapsed_seconds=elapsed,
        time_limit_seconds=8 * 86400.0,
        cpus=cpus,
        memory_requested_bytes=mem,
        gpus=0,
        start_time=start,
        end_time=end,
        node_list=node_list,
        work_dir="/home/alice/climate",
        steps=steps,
    )
    return acct, sj


def report(acct: FixedAccounting, sacct: FixedSacct, source: PrometheusSource) -> JobReport:
    r = build_report(JobId.parse(JOB_ID), "bench", acct, sacct, source)
    return dataclasses.replace(r, findings=detect_all(r, Thresholds()))


def fetched(r: JobReport) -> tuple[int, int]:
    u = r.usage
    all_series = [
        s
        for group in (
            u.cpu_cores,
            u.cpu_per_core,
            u.memory_rss,
            u.gpu_utilization,
            u.gpu_memory_used,
            u.io_read_rate,
            u.io_write_rate,
        )
        for s in group
    ]
    return len(all_series), sum(len(s.points) for s in all_series)


def interleaved(fns: dict, runs: int) -> dict[str, list[float]]:
    """ms per call of each function: one warm-up each (page cache, Prometheus' chunk
    cache, connections), then ``runs`` rounds calling each once in turn."""
    for fn in fns.values():
        fn()
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            out[name].append((time.perf_counter() - t) * 1000)
    return out


def cpu_ms(pid: int) -> tuple[float, float]:
    """(this process, process ``pid``) CPU time so far, in ms: user + system, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return time.process_time() * 1000, (int(fields[11]) + int(fields[12])) * 1000 / ticks


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def machine() -> str:
    debian = Path("/etc/debian_version")
    version = debian.read_text().strip() if debian.exists() else "?"
    prom = subprocess.run(["prometheus", "--version"], capture_output=True, text=True)
    found = re.search(r"version (\S+)", prom.stdout or prom.stderr)
    prom_version = found.group(1) if found else "?"
    return (
        f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), kernel "
        f"{platform.release()}, Debian {version}, Python {platform.python_version()}, "
        f"Prometheus {prom_version}"
    )


class CountingSession(requests.Session):
    """A plain session that counts the HTTP requests made through it (thread-safe) and
    keeps the last ones' URL and parameters (to replay them as the floor)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = itertools.count()
        self.recorded: list[tuple[str, dict]] = []

    def request(self, method, url, params=None, **kwargs):  # noqa: ANN001, ANN003, ANN201
        next(self.requests)
        self.recorded.append((url, dict(params or {})))
        return super().request(method, url, params=params, **kwargs)


def floor(recorded: list[tuple[str, dict]], session: requests.Session):  # noqa: ANN201
    """Prometheus alone answering one report's requests: the same URLs and parameters,
    as concurrent, bodies read and not parsed."""
    headers = {"Accept-Encoding": "identity"}

    def one(request: tuple[str, dict]) -> int:
        return len(session.get(request[0], params=request[1], headers=headers).content)

    def run() -> int:
        with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(recorded))) as pool:
            return sum(pool.map(one, recorded))

    return run


def sequential(calls):  # noqa: ANN001, ANN201 -- for --profile: queries in the main thread
    return [call() for call in calls]


def stats(times: list[float]) -> str:
    return f"p50 {statistics.median(times):5.0f} ms, p95 {p95(times):5.0f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--cores", type=int, default=32)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile one build + text and one build + JSON, queries run sequentially",
    )
    args = ap.parse_args()
    if args.runs < 7:
        ap.error("--runs must be at least 7")
    if not port_free(PORT):
        print(f"127.0.0.1:{PORT} is in use; refusing to benchmark someone else's server")
        return 1

    end = (int(time.time()) - 3600) // INTERVAL * INTERVAL  # ended an hour ago
    shape = Shape(args.nodes, args.cores, args.days, end - int(args.days * 86400), end)
    print(f"machine: {machine()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    tmp = Path(tempfile.mkdtemp(prefix="jobreport-bench-report-"))
    proc = None
    try:
        om, data = tmp / "history.om", tmp / "data"
        t = time.perf_counter()
        n_series, n_samples = write_openmetrics(om, shape)
        gen_s = time.perf_counter() - t
        size_mb = om.stat().st_size / 1e6
        print(
            f"history: {args.days:g} days x {args.nodes} nodes x {args.cores} cores at "
            f"{INTERVAL} s: {n_series} series, {n_samples:,} samples, {size_mb:.0f} MB of "
            f"OpenMetrics generated in {gen_s:.1f} s"
        )
        t = time.perf_counter()
        backfill(om, data, MAX_BLOCK)
        backfill_s = time.perf_counter() - t
        om.unlink()
        blocks = [p for p in data.iterdir() if p.is_dir()]
        disk_mb = sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) / 1e6
        print(
            f"backfill: promtool wrote {len(blocks)} blocks ({disk_mb:.0f} MB, "
            f"--max-block-duration={MAX_BLOCK}) in {backfill_s:.1f} s"
        )
        t = time.perf_counter()
        proc = start_prometheus(tmp, data, PORT)
        print(f"prometheus on 127.0.0.1:{PORT} ready in {time.perf_counter() - t:.1f} s")

        a, s = records(shape)
        acct, sacct = FixedAccounting(a), FixedSacct(s)
        session = CountingSession()
        url = f"http://127.0.0.1:{PORT}"
        source = PrometheusSource(url, scrape_interval=INTERVAL, session=session)
        first = report(acct, sacct, source)
        assert not first.gaps, first.gaps
        assert len(first.usage.cpu_per_core) == args.nodes * args.cores, "per-core series"
        u = first.usage
        assert None not in (u.memory_limit_bytes, u.read_bytes, u.open_files_max, u.scratch_in_use)
        n_fetched, n_points = fetched(first)
        n_requests = next(session.requests)
        recorded = list(session.recorded)
        busy = statistics.mean(s.mean() for s in first.usage.cpu_cores)
        print(
            f"report: {n_requests} HTTP requests, {n_fetched} series, {n_points:,} points; "
            f"{busy:.1f} cores busy per node on average; findings: "
            f"{', '.join(f.name for f in first.findings) or 'none'}"
        )

        def text() -> str:
            return text_renderer.render(report(acct, sacct, source))

        def json() -> str:
            return json_renderer.render(report(acct, sacct, source))

        if args.profile:
            source._run = sequential  # so that cProfile sees the queries
            for name, fn in (("text", text), ("json", json)):
                prof = cProfile.Profile()
                prof.runcall(fn)
                print(f"--- cProfile, build + {name} render (queries one after another)")
                pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(20)
            del source._run

        job = (JOB_ID, a.start_time, a.end_time, a.nodes)
        for resolution in ("plot", "full"):
            now = source.usage(*job, resolution=resolution)
            diff = differences(figures_before(source, *job, resolution), now)
            print(f"figures at {resolution} resolution vs the first version's whole-window "
                  f"queries: {'all within 1 %' if not diff else diff}")
            if diff:
                return 1

        print(f"timings: one warm-up, then {args.runs} rounds, each running every line once "
              "in turn (so the machine's load falls on all alike); p95 is the nearest rank")
        fl = floor(recorded, requests.Session())
        lines = {
            "floor: prometheus alone": fl,
            "build + text render": text,
            "build + json render": json,
        }
        results = interleaved(lines, args.runs)
        for label, times in results.items():
            print(f"  {label:<31} {stats(times)}")
        print(f"  (floor: the report's {len(recorded)} requests replayed concurrently, answers "
              f"read, not parsed: {fl():,} bytes; JSON answer {len(json()):,} bytes)")
        # Where the time goes, and what a remote Prometheus (gzip answers) costs.
        gzip = PrometheusSource(url, scrape_interval=INTERVAL, compress=True)
        parts = {
            "build only (queries, model)": lambda: report(acct, sacct, source),
            "text render only": lambda: text_renderer.render(first),
            "json render only": lambda: json_renderer.render(first),
            "json render, pretty": lambda: json_renderer.render(first, pretty=True),
            "build + text, gzip answers": lambda: text_renderer.render(report(acct, sacct, gzip)),
        }
        for label, times in interleaved(parts, args.runs).items():
            print(f"  {label:<31} {stats(times)}")
        print("  (gzip answers: what a remote Prometheus sends; network time not included)")
        # CPU time does not depend on what else the machine runs: wall time on a shared
        # 2-CPU machine does. "before": the first version's queries for the same job.
        cpu = {"before": ([], []), "now": ([], []), "floor": ([], [])}
        for _ in range(args.runs):
            for name, fn in (
                ("before", lambda: figures_before(source, *job)),
                ("now", lambda: report(acct, sacct, source)),
                ("floor", fl),
            ):
                c0, s0 = cpu_ms(proc.pid)
                fn()
                c1, s1 = cpu_ms(proc.pid)
                cpu[name][0].append(c1 - c0)
                cpu[name][1].append(s1 - s0)
        (_, bs), (nc, ns), (_, fs) = cpu["before"], cpu["now"], cpu["floor"]
        print(
            f"  CPU per build (p50)             this process {statistics.median(nc):.0f} ms, "
            f"prometheus {statistics.median(ns):.0f} ms (the floor's requests "
            f"{statistics.median(fs):.0f} ms; the first version's queries "
            f"{statistics.median(bs):.0f} ms, {figures_before(source, *job).requests} requests)"
        )
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"history: generation {gen_s:.1f} s, backfill {backfill_s:.1f} s")
        p50 = {name: statistics.median(results[f"build + {name} render"]) for name in TARGETS_MS}
        print(
            f"report build p50: text {p50['text']:.0f} ms, json {p50['json']:.0f} ms (targets "
            f"{TARGETS_MS['text']:.0f} / {TARGETS_MS['json']:.0f} ms), floor "
            f"{statistics.median(results['floor: prometheus alone']):.0f} ms; prometheus CPU "
            f"{statistics.median(ns):.0f} ms, {statistics.median(bs):.0f} ms before"
        )
        return 0
    finally:
        stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
