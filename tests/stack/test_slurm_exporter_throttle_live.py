"""Throttling on the real stack's commands, the poll limits on a clock the test moves: one
command per poll limit for any number of scrapes, timeouts kill the process group, failing
sources keep their last snapshot for 3 poll limits with up=0, then lose their series, and
come back by themselves. (ThrottledSource alone: tests/test_slurm_exporter_throttle.py.)"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from slurm_exporter.exposition import render, serve
from slurm_exporter.registry import SlurmCollector, build_sources
from slurm_exporter.settings import Settings
from tests.helpers import stack
from tests.helpers.exporter_scrape import samples
from tests.helpers.slurm_wrappers import Wrappers, alive, require_slurm
from tests.helpers.sync import sbatch
from tests.helpers.wait import wait_for

CPUS = os.cpu_count()  # every node of the stack declares this machine's CPUs


def NODE() -> str:  # noqa: N802 - reads like the constant it stands for
    return stack.nodes()[0].name


def value(text: str, name: str, **labels: str) -> float | None:
    want = set(labels.items())
    for (n, lbls), v in samples(text).items():
        if n == name and want <= set(lbls):
            return v
    return None


@pytest.fixture()
def exporter(tmp_path: Path):
    """A real slurm-exporter over HTTP whose commands go through counting wrappers, its poll
    limits counted on a clock the test moves (``clock[0]``, seconds): (wrappers, start,
    clock). Only the commands' own timeouts run on the wall clock."""
    require_slurm()
    wrappers = Wrappers(tmp_path)
    clock = [0.0]

    def start(poll_limit: float, timeout: float = 5.0) -> str:
        settings = Settings(poll_limit=poll_limit, timeout=timeout, bin_dir=str(tmp_path))
        collector = SlurmCollector("demo", build_sources(settings, monotonic=lambda: clock[0]))
        server = serve("127.0.0.1", 0, lambda: render(collector.collect()))
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/metrics"

    servers: list = []
    yield wrappers, start, clock
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.stack
def test_twenty_concurrent_scrapes_run_each_command_once(exporter):
    wrappers, start, _ = exporter  # the clock stands: every scrape within the poll limit
    url = start(poll_limit=30)
    texts: list[str] = []
    barrier = threading.Barrier(20)

    def scrape() -> None:
        barrier.wait()
        texts.append(requests.get(url, timeout=30).text)

    threads = [threading.Thread(target=scrape) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(texts) == 20
    for name in ("sinfo", "squeue", "sshare", "sdiag"):
        assert wrappers.runs(name) == 1, name
        assert all(value(t, "slurm_up", source=name) == 1 for t in texts)
    assert all(value(t, "slurm_node_cpus", node=NODE()) == CPUS for t in texts)
    assert value(texts[0], "slurm_scrape_runs_total", source="squeue") == 1


@pytest.mark.stack
def test_a_hanging_sinfo_is_killed_and_the_last_snapshot_served(exporter):
    wrappers, start, clock = exporter
    url = start(poll_limit=1.0, timeout=1.0)
    assert value(requests.get(url, timeout=30).text, "slurm_up", source="sinfo") == 1
    wrappers.set("sinfo", "hang")
    clock[0] += 1.1  # past the poll limit: the next scrape runs sinfo again
    began = time.monotonic()
    text = requests.get(url, timeout=30).text
    assert 1.0 <= time.monotonic() - began < 5  # its timeout, on the wall clock
    assert value(text, "slurm_scrape_errors_total", source="sinfo", kind="timeout") == 1
    assert value(text, "slurm_up", source="sinfo") == 0
    assert value(text, "slurm_up", source="squeue") == 1  # the others are unaffected
    assert value(text, "slurm_node_cpus", node=NODE()) == CPUS  # last snapshot served
    assert value(text, "slurm_scrape_snapshot_age_seconds", source="sinfo") == \
        pytest.approx(1.1)
    assert not alive(wrappers.child_pid("sinfo"))  # the wrapper's child died with its group


def jobs(text: str) -> dict[tuple, float]:
    """The exposition's slurm_jobs series: labels -> jobs."""
    return {labels: v for (name, labels), v in samples(text).items() if name == "slurm_jobs"}


@pytest.mark.stack
def test_slurmctld_unreachable_drops_series_after_three_poll_limits_then_back(exporter):
    wrappers, start, clock = exporter
    poll = 10.0
    url = start(poll_limit=poll, timeout=20.0)
    # A held job of the test's own: the queue's series are never empty.
    held = sbatch("alice", "-H", "-J", "throttle-held", "--mem=50M", "--time=1", "--wrap",
                  "sleep 1")
    try:
        def scrape_at(t: float) -> str:
            clock[0] = t
            return requests.get(url, timeout=60).text

        def answered() -> str | None:  # a poll limit later each time: squeue runs again
            text = scrape_at(clock[0] + poll)
            return text if jobs(text) else None

        # squeue may answer slowly while the suite's jobs load slurmctld: its first good
        # run is the starting point (the failures below are the wrapper's).
        ok = wait_for(answered, 60, "squeue answering with the held job")
        ok_at = clock[0]
        failed = value(ok, "slurm_scrape_errors_total", source="squeue", kind="exit")
        wrappers.set("squeue", "fail")
        text = scrape_at(ok_at + poll)  # squeue runs and fails: its last snapshot served
        assert value(text, "slurm_up", source="squeue") == 0
        assert value(text, "slurm_scrape_errors_total", source="squeue", kind="exit") == \
            failed + 1
        assert jobs(text) == jobs(ok)
        assert value(text, "slurm_scrape_snapshot_age_seconds", source="squeue") == poll
        text = scrape_at(ok_at + 3 * poll)  # fails again, at three poll limits: still served
        assert jobs(text) == jobs(ok)
        text = scrape_at(ok_at + 3 * poll + 0.1)  # no run, the snapshot too old: dropped
        assert value(text, "slurm_up", source="squeue") == 0
        assert jobs(text) == {}
        assert value(text, "slurm_scrape_snapshot_age_seconds", source="squeue") is None
        assert value(text, "slurm_node_cpus", node=NODE()) == CPUS  # sinfo still fine
        assert value(text, "slurm_scrape_runs_total", source="squeue") == \
            value(ok, "slurm_scrape_runs_total", source="squeue") + 2
        wrappers.set("squeue", "fail", on=False)
        text = scrape_at(ok_at + 4 * poll)  # back at the next poll limit
        assert value(text, "slurm_up", source="squeue") == 1
        assert jobs(text)
    finally:
        subprocess.run(["scancel", held], check=False)
