"""Soak of jobs-exporter on the real local Slurm stack (not a test; run as root).

Starts this checkout's exporter on its own port (the node's real cgroups, GPU
allocations and scontrol, replayed NVML readings) and scrapes it over HTTP back to back,
while a driver keeps real jobs starting and ending underneath as the user ``--user``:
a job with 5,000 processes, a job holding 10,000 open files, jobs whose processes start
and exit all the time, a GPU job, and jobs of a second or two (cgroups appearing and
vanishing mid-scrape).

A scrape fails when the HTTP answer is not 200, prometheus_client's text parser rejects
it, a collector reports success 0, a series appears twice, a job has series but no
``jobs_info``, or a counter of a job goes down. Prints the failures (0 expected), the
exporter's RSS after the first and the last scrape, scrape latency and the largest job
seen; exits 1 on a failure or when no scrape saw a job at 5,000 processes and one at
10,000 open files.

    .venv/bin/python bench/soak_exporter.py [--scrapes 10000] [--port 9316]
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from tqdm import tqdm

ROOT = pathlib.Path(__file__).resolve().parent.parent
REPLAY = ROOT / "fixtures" / "exporter" / "nvml" / "stack-replay.json"
MONOTONIC = ("_total",)  # counters: never down for the same job and labels
PEAKS = ("jobs_processes{", "jobs_open_files{", "jobs_threads{")

# name -> (sbatch options, script); the driver cycles through them.
JOBS: dict[str, tuple[tuple[str, ...], str]] = {
    "procs5000": (  # posix_spawn (vfork): fast on a busy core, no copied Python heap
        ("--mem=4G",),
        "#!/bin/bash\nexec python3 -c '\n"
        "import os, time\n"
        "for _ in range(4999):\n"
        "    os.posix_spawn(\"/bin/sleep\", [\"sleep\", \"45\"], os.environ)\n"
        "time.sleep(45)\n'\n",
    ),
    "files10000": (
        ("--mem=500M",),
        "#!/bin/bash\nexec python3 -c '\n"
        "import resource, time\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n"
        "files = [open(\"/dev/null\") for _ in range(10000)]\n"
        "time.sleep(40)\n'\n",
    ),
    "churn": (
        ("--mem=300M",),
        "#!/bin/bash\nend=$((SECONDS + 20))\n"
        "while [ $SECONDS -lt $end ]; do\n"
        "  (sleep 0.$((RANDOM % 3)); dd if=/dev/zero of=/dev/null bs=64k count=16 2>/dev/null) &\n"
        "  sh -c 'exit 0'; sleep 0.05\n"
        "done\nwait\n",
    ),
    "gpu": (("--mem=100M", "--gres=gpu:t4:1"), "#!/bin/bash\nsleep 8 & sleep 8\n"),
    "blink": (("--mem=100M",), "#!/bin/bash\nsleep 1\n"),
}
# Every soak job runs on the stack's T4 node, which the exporter under test reads (the GPU
# jobs need one of its GPUs; the rest fit beside them).
NODE = "gpu1"
ROTATION = ("procs5000", "blink", "churn", "files10000", "blink", "gpu", "churn", "blink")


class JobDriver(threading.Thread):
    """Keeps up to ``active`` of our jobs queued or running, cycling through ROTATION."""

    def __init__(self, user: str, active: int):
        super().__init__(daemon=True)
        self.user = user
        self.active = active
        self.stop = threading.Event()
        self.submitted: list[str] = []
        self.counts: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []

    def run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            if self._mine_active() < self.active:
                kind = ROTATION[turn % len(ROTATION)]
                turn += 1
                self._submit(kind)
            self.stop.wait(1.0)

    def _mine_active(self) -> int:
        if not self.submitted:
            return 0
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-j", ",".join(self.submitted[-50:])],
            capture_output=True,
            text=True,
        )
        return len(out.stdout.split())

    def _submit(self, kind: str) -> None:
        options, script = JOBS[kind]
        done = subprocess.run(
            ["runuser", "-u", self.user, "--", "sbatch", "--parsable", "-c1", "--time=3",
             "-p", "gpu", "-w", NODE]
            + ["--chdir=/tmp", "-o", "/dev/null", "-J", f"soak-{kind}", *options],
            input=script,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            self.errors.append(f"sbatch {kind}: {done.stderr.strip()}")
            return
        self.submitted.append(done.stdout.strip().split(";")[0])
        self.counts[kind] += 1

    def cancel_all(self) -> None:
        self.stop.set()
        self.join(timeout=10)
        if self.submitted:
            subprocess.run(["scancel", *self.submitted], check=False)


def start_exporter(port: int) -> subprocess.Popen:
    exe = pathlib.Path(sys.executable).parent / "jobs-exporter"
    proc = subprocess.Popen(
        [str(exe), "--listen", f"127.0.0.1:{port}", "--node-name", NODE]
        + ["--nvml-replay", str(REPLAY), "--scratch", "/scratch"],
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"exporter did not answer on port {port}")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def check(text: str, last: dict[tuple, float]) -> list[str]:
    """Problems with one exposition (empty: well-formed); updates ``last`` counters."""
    problems = []
    seen: set[tuple] = set()
    info_jobs, series_jobs = set(), set()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in seen:
                problems.append(f"duplicate series {key}")
            seen.add(key)
            job = s.labels.get("jobid")
            if s.name == "jobs_info":
                info_jobs.add(job)
            elif job is not None:
                series_jobs.add(job)
            if s.name == "jobs_scrape_collector_success" and s.value != 1:
                problems.append(f"collector {s.labels['collector']} failed")
            if job is not None and s.name.endswith(MONOTONIC):
                before = last.get(key)
                if before is not None and s.value < before:
                    problems.append(f"{key} went down: {before} -> {s.value}")
                last[key] = s.value
    for job in series_jobs - info_jobs:
        problems.append(f"job {job} has series but no jobs_info")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scrapes", type=int, default=10000, help="scrapes to make")
    parser.add_argument("--port", type=int, default=9316, help="port for this soak's exporter")
    parser.add_argument("--user", default="alice", help="submit the jobs as this user")
    parser.add_argument("--active", type=int, default=3, help="our jobs queued or running")
    parser.add_argument(
        "--interval",
        type=float,
        default=0.05,
        help="least seconds between scrape starts, so the run spans many jobs (0: none)",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("needs root (the exporter reads every job's /proc)")
    exporter = start_exporter(args.port)
    driver = JobDriver(args.user, args.active)
    url = f"http://127.0.0.1:{args.port}/metrics"
    failures: list[str] = []
    walls: list[float] = []
    last: dict[tuple, float] = {}
    most_jobs = most_series = 0
    peaks: collections.Counter[str] = collections.Counter()  # largest value seen per metric
    rss_first = rss_last = rss_max = 0.0
    try:
        driver.start()
        for i in tqdm(range(args.scrapes), unit="scrape", mininterval=1.0):
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=10) as answer:
                    status, body = answer.status, answer.read().decode()
                problems = [] if status == 200 else [f"HTTP {status}"]
                problems += check(body, last)
            except Exception as exc:  # noqa: BLE001 - any failure of a scrape is the finding
                problems = [f"{type(exc).__name__}: {exc}"]
                body = ""
            walls.append(time.perf_counter() - start)
            if problems:
                failures.append(f"scrape {i + 1}: {'; '.join(problems[:3])}")
            most_jobs = max(most_jobs, body.count("jobs_info{"))
            most_series = max(most_series, body.count("\njobs_"))
            for line in body.splitlines():
                if line.startswith(PEAKS):
                    name = line.split("{", 1)[0]
                    peaks[name] = max(peaks[name], int(float(line.rsplit(" ", 1)[1])))
            pause = args.interval - (time.perf_counter() - start)
            if pause > 0:
                time.sleep(pause)
            rss = rss_mib(exporter.pid)
            rss_max = max(rss_max, rss)
            if i == 0:
                rss_first = rss
            rss_last = rss
    finally:
        driver.cancel_all()
        exporter.terminate()
        exporter.wait(timeout=10)
    walls.sort()
    print(f"scrapes: {len(walls)}, failed: {len(failures)}")
    for line in failures[:20]:
        print("  " + line)
    print(
        f"exporter RSS: first {rss_first:.1f} MiB, last {rss_last:.1f} MiB, "
        f"max {rss_max:.1f} MiB"
    )
    print(
        f"scrape wall: p50 {statistics.median(walls) * 1000:.1f} ms, "
        f"p95 {walls[int(len(walls) * 0.95) - 1] * 1000:.1f} ms, max {walls[-1] * 1000:.1f} ms"
    )
    print(f"most jobs in one scrape: {most_jobs}, most series: {most_series}")
    print("largest per job: " + ", ".join(f"{k} {v:,}" for k, v in sorted(peaks.items())))
    print(f"jobs submitted: {dict(driver.counts)}; sbatch errors: {len(driver.errors)}")
    for line in driver.errors[:5]:
        print("  " + line)
    # The soak proves nothing about jobs it never saw at full size.
    missing = [
        f"{name} never reached {want:,} in one job"
        for name, want in (("jobs_processes", 5000), ("jobs_open_files", 10000))
        if peaks[name] < want
    ]
    for line in missing:
        print("NOT EXERCISED: " + line)
    return 1 if failures or missing else 0


if __name__ == "__main__":
    sys.exit(main())
