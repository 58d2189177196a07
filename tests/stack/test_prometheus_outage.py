"""Prometheus restarted, then down for a minute, while a real job runs: the report
built against it keeps every sample it stored, shows the restart as a short gap at most,
names the outage as a gap of its size, withholds the verdicts that rest on the nodes'
samples, and keeps the CPU figures that rest on sacct exactly.

Isolated from the shared stack's other tests: the Prometheus restarted and stopped is
the test's own (its own data directory, a free port), scraping the stack's exporters
every 5 s as the stack's does; the stack's Prometheus is never touched. The job is the
test's own, and ends when the test writes its stop file, so its run spans the faults
however slowly the loaded machine gets through them.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import requests

from tests.helpers import stack
from tests.helpers.mail import free_port
from tests.helpers.sync import known
from tests.helpers.wait import wait_for

SCRAPE = 5  # seconds, the stack's JOBREPORT_SCRAPE_INTERVAL
OUTAGE = 60  # seconds Prometheus is down (coverage then ~0.55, under 0.8)
SAMPLES_BEFORE = 4  # scrapes of the job before each fault (a rate needs two)


class OwnPrometheus:
    """A Prometheus on a free loopback port over its own data directory, scraping the
    stack's exporters; stopped (TERM) and started again on the same data directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.port = tmp, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        (tmp / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: {SCRAPE}s\nscrape_configs:\n  - job_name: jobs\n"
            "    static_configs:\n" + stack.exporter_targets_yaml())

    def start(self) -> float:
        """Start it; seconds until it answers ready."""
        t = time.monotonic()
        with open(self.tmp / "prometheus.log", "a") as log:
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={self.tmp / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.tmp / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp, start_new_session=True)

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError((self.tmp / "prometheus.log").read_text()[-2000:])
            try:
                return requests.get(f"{self.url}/-/ready", timeout=1).ok
            except requests.RequestException:
                return False

        wait_for(ready, 120, f"prometheus on {self.url} ready", every=0.2)
        return time.monotonic() - t

    def stop(self) -> float:
        """TERM, as systemd stops it; seconds until it exited."""
        t = time.monotonic()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return time.monotonic() - t

    def samples(self, job_id: str) -> int:
        """Raw samples of the job's user CPU counter it holds (0 while down)."""
        try:
            answer = requests.get(f"{self.url}/api/v1/query", timeout=10, params={
                "query": f'count_over_time(jobs_cpu_seconds_total{{jobid="{job_id}",'
                         f'mode="user"}}[1h])'}).json()
        except requests.RequestException:
            return 0
        return sum(int(r["value"][1]) for r in answer["data"]["result"])


@pytest.fixture
def prometheus(tmp_path: Path):
    own = OwnPrometheus(tmp_path)
    own.start()
    try:
        yield own
    finally:
        own.stop()


def show(env: dict[str, str], job_id: str) -> dict:
    done = stack.jobreport("show", job_id, "--format", "json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def node_gaps(report: dict) -> list[tuple[float, float]]:
    (node,) = report["coverage"]["nodes"]
    return [tuple(g) for g in node["gaps"]]


def test_restart_and_outage_mid_job(stack_env: dict[str, str], prometheus: OwnPrometheus,
                                    tmp_path: Path) -> None:
    stop_file = Path(f"/home/alice/.outage-{uuid.uuid4().hex}")
    # Running until the test says so, the stop file looked for twice a second: a little
    # work of shell builtins between half-second sleeps (a busy loop here took a core
    # from the suite for the test's two and a half minutes; nothing here judges its CPU).
    job = stack.StackJob(
        "prometheus-outage", "alice", ("-c1", "--mem=100M", "--time=10"),
        f"while [ ! -e {stop_file} ]; do i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done; "
        "sleep 0.5; done")
    env = {**known(stack_env), "JOBREPORT_PROMETHEUS_URL": prometheus.url,
           "JOBREPORT_SCRAPE_INTERVAL": str(SCRAPE),
           "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")}
    job_id = stack.submit(job)
    try:
        stack.wait_until_running(job_id, timeout=600)  # behind the session batch
        wait_for(lambda: prometheus.samples(job_id) >= SAMPLES_BEFORE, 120,
                 "the job's first scrapes")

        # (a) A quick restart: TERM, then started again on the same data directory.
        before = prometheus.samples(job_id)
        restart_at = time.time()
        down = prometheus.stop() + prometheus.start()
        restarted_at = time.time()
        wait_for(lambda: prometheus.samples(job_id) >= before + SAMPLES_BEFORE, 120,
                 "scrapes after the restart")
        running = show(env, job_id)
        assert running["cpu_seconds_source"] == "prometheus"  # still running
        assert running["series"]["cpu_cores"], "no CPU figures after the restart"
        # Every sample stored before the restart is still there: coverage from the start.
        restart_gaps = node_gaps(running)
        assert all(hi - lo <= 3 * SCRAPE for lo, hi in restart_gaps), restart_gaps
        assert running["coverage"]["nodes"][0]["fraction"] >= 0.8, running["coverage"]

        # (b) Down for a minute.
        outage_at = time.time()
        prometheus.stop()
        # The report meanwhile says where the metrics went, and still answers.
        during = show(env, job_id)
        assert any(g["source"] == "prometheus" for g in during["gaps"]), during["gaps"]
        time.sleep(max(0.0, outage_at + OUTAGE - time.time()))  # the outage itself
        prometheus.start()
        back_at = time.time()
        wait_for(lambda: prometheus.samples(job_id) >= before + 2 * SAMPLES_BEFORE + 2, 120,
                 "scrapes after the outage")
    finally:
        stop_file.touch()
    try:
        stack.wait_until_done([job_id])
    finally:
        stop_file.unlink(missing_ok=True)
    stack.wait_for_scrape_after(prometheus.url, time.time())

    report = show(env, job_id)
    gaps = node_gaps(report)
    print(f"\nrestart: down {down:.1f} s; outage {back_at - outage_at:.0f} s; "
          f"job {report['elapsed_seconds']} s; gaps "
          f"{[(round(lo - restart_at), round(hi - lo)) for lo, hi in gaps]} "
          f"(start s after the restart, length s); coverage "
          f"{report['coverage']['nodes'][0]['fraction']:.2f}")
    # The restart: a short gap at most.
    near_restart = [(lo, hi) for lo, hi in gaps
                    if lo <= restarted_at + SCRAPE and hi >= restart_at - SCRAPE]
    assert all(hi - lo <= 3 * SCRAPE for lo, hi in near_restart), gaps
    # The outage: one gap as long as it, give or take a scrape and the start's seconds.
    (outage,) = [(lo, hi) for lo, hi in gaps if hi - lo > 3 * SCRAPE]
    assert outage[0] == pytest.approx(outage_at, abs=2 * SCRAPE), (outage, outage_at)
    assert outage[1] - outage[0] == pytest.approx(back_at - outage_at, abs=3 * SCRAPE)
    coverage = report["coverage"]
    assert coverage["nodes"][0]["fraction"] < coverage["min_coverage"], coverage["nodes"]
    # The verdicts resting on the nodes' samples are withheld, saying why; a note says so.
    withheld = {v["detector"] for v in coverage["verdicts"] if v["withheld"]}
    assert {"node_idle", "oversubscribed", "cpu_starved"} <= withheld, withheld
    assert not withheld & {f["name"] for f in report["findings"]}
    assert any("Verdicts withheld, samples cover too little" in n for n in report["notes"]), \
        report["notes"]
    # The CPU figures rest on sacct, which the outage did not touch: they stand, exactly.
    assert report["cpu_seconds_source"].startswith("sacct")
    assert "cpu_efficiency_low" not in withheld
    # The job's own line, which sums its steps' TotalCPU (with -X sacct prints 00:00:00).
    acct = subprocess.run(["sacct", "-n", "-P", "-j", job_id, "--format=TotalCPU,ElapsedRaw"],
                          check=True, capture_output=True,
                          text=True).stdout.splitlines()[0].split("|")
    assert report["elapsed_seconds"] == int(acct[1])
    assert report["cpu_seconds"] == pytest.approx(total_cpu_seconds(acct[0]), abs=0.1)
    # The same figures as the stack's Prometheus, which saw the whole run, gives.
    whole = show(known(stack_env) | {"JOBREPORT_ARCHIVE_URL": env["JOBREPORT_ARCHIVE_URL"],
                                     "JOBREPORT_OUTBOX": env["JOBREPORT_OUTBOX"]}, job_id)
    assert whole["coverage"]["nodes"][0]["fraction"] >= 0.8
    for key in ("cpu_seconds", "cpu_efficiency", "elapsed_seconds", "state"):
        assert report[key] == whole[key], key


def total_cpu_seconds(text: str) -> float:
    """sacct's TotalCPU ([D-]HH:MM:SS or MM:SS.mmm) in seconds."""
    days, _, clock = text.strip().rpartition("-")
    parts = [float(p) for p in clock.split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    return seconds + (int(days) * 86400 if days else 0)
