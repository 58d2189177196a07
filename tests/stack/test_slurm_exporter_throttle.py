"""Throttling on the real stack: one command per poll limit for any number of scrapes,
timeouts kill the process group, failing sources keep their last snapshot for 3 poll
limits with up=0, then lose their series, and come back by themselves."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from slurm_exporter.exposition import render, serve
from slurm_exporter.registry import SlurmCollector, build_sources
from slurm_exporter.runner import CommandFailed, run_command
from slurm_exporter.settings import Settings
from slurm_exporter.throttle import ThrottledSource
from tests.helpers import stack
from tests.helpers.slurm_wrappers import Wrappers, require_slurm
from tests.helpers.wait import wait_for

CPUS = os.cpu_count()  # every node of the stack declares this machine's CPUs


def NODE() -> str:  # noqa: N802 - reads like the constant it stands for
    return stack.nodes()[0].name


def alive(pid: int) -> bool:
    """A killed child reparented to a PID 1 that does not reap stays a zombie: dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    want = set(labels.items())
    for (n, lbls), v in samples(text).items():
        if n == name and want <= set(lbls):
            return v
    return None


@pytest.fixture()
def exporter(tmp_path: Path):
    """A real slurm-exporter over HTTP whose commands go through counting wrappers."""
    require_slurm()
    wrappers = Wrappers(tmp_path)

    def start(poll_limit: float, timeout: float = 5.0) -> str:
        settings = Settings(poll_limit=poll_limit, timeout=timeout, bin_dir=str(tmp_path))
        collector = SlurmCollector("demo", build_sources(settings))
        server = serve("127.0.0.1", 0, lambda: render(collector.collect()))
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/metrics"

    servers: list = []
    yield wrappers, start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.stack
def test_twenty_concurrent_scrapes_run_each_command_once(exporter):
    wrappers, start = exporter
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
    wrappers, start = exporter
    url = start(poll_limit=1.0, timeout=1.0)
    assert value(requests.get(url, timeout=30).text, "slurm_up", source="sinfo") == 1
    wrappers.set("sinfo", "hang")
    time.sleep(1.1)
    began = time.monotonic()
    text = requests.get(url, timeout=30).text
    assert 1.0 <= time.monotonic() - began < 5
    assert value(text, "slurm_scrape_errors_total", source="sinfo", kind="timeout") == 1
    assert value(text, "slurm_up", source="sinfo") == 0
    assert value(text, "slurm_up", source="squeue") == 1  # the others are unaffected
    assert value(text, "slurm_node_cpus", node=NODE()) == CPUS  # last snapshot served
    assert value(text, "slurm_scrape_snapshot_age_seconds", source="sinfo") >= 1.0
    assert not alive(wrappers.child_pid("sinfo"))  # the wrapper's child died with its group


@pytest.mark.stack
def test_slurmctld_unreachable_drops_series_after_three_poll_limits_then_back(exporter):
    wrappers, start = exporter
    poll = 2.0  # long beside a scrape on a loaded machine (a scrape runs four commands)
    # squeue may answer slowly while the suite's jobs load slurmctld: a first good run
    # within a minute is the starting point (the failures below are the wrapper's).
    url = start(poll_limit=poll, timeout=20.0)
    wait_for(lambda: value(requests.get(url, timeout=30).text, "slurm_jobs") is not None, 60,
             "squeue answering", every=poll)
    ok_at = time.monotonic()
    wrappers.set("squeue", "fail")
    time.sleep(poll + 0.1)
    text = requests.get(url, timeout=30).text
    assert value(text, "slurm_up", source="squeue") == 0
    assert value(text, "slurm_scrape_errors_total", source="squeue", kind="exit") == 1
    assert value(text, "slurm_jobs") is not None  # still within 3 poll limits
    time.sleep(max(0.0, ok_at + 3 * poll + 0.2 - time.monotonic()))
    text = requests.get(url, timeout=30).text
    assert value(text, "slurm_up", source="squeue") == 0
    assert value(text, "slurm_jobs") is None  # dropped
    assert value(text, "slurm_scrape_snapshot_age_seconds", source="squeue") is None
    assert value(text, "slurm_node_cpus", node=NODE()) == CPUS  # sinfo still fine
    wrappers.set("squeue", "fail", on=False)
    time.sleep(poll + 0.1)
    text = requests.get(url, timeout=30).text
    assert value(text, "slurm_up", source="squeue") == 1
    assert value(text, "slurm_jobs") is not None


def test_an_empty_result_is_cached_like_any_other():
    calls = []
    clock = [0.0]

    def fetch() -> list:
        calls.append(1)
        return []

    source = ThrottledSource("squeue", fetch, poll_limit=10, monotonic=lambda: clock[0])
    assert source.get() == [] and source.get() == []
    clock[0] = 9.9
    assert source.get() == []
    assert len(calls) == 1
    clock[0] = 10.0
    source.get()
    assert len(calls) == 2


def test_a_failed_run_is_not_retried_before_the_poll_limit():
    calls = []
    clock = [0.0]

    def fetch() -> list:
        calls.append(1)
        raise CommandFailed("exit", "squeue exited 1")

    source = ThrottledSource("squeue", fetch, poll_limit=10, monotonic=lambda: clock[0])
    assert source.get() is None and source.get() is None
    assert len(calls) == 1
    assert source.health.errors == {"timeout": 0, "exit": 1, "parse": 0}


def test_a_parse_error_counts_as_parse():
    source = ThrottledSource("sdiag", lambda: int("x"), poll_limit=10)
    assert source.get() is None
    assert source.health.errors["parse"] == 1 and not source.health.up


def test_run_command_kills_the_whole_process_group(tmp_path: Path):
    pid_file = tmp_path / "child"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    with pytest.raises(CommandFailed) as caught:
        run_command(["sh", "-c", script], timeout=2, env=os.environ)
    assert caught.value.kind == "timeout"
    child = int(pid_file.read_text())
    # Killed with its group; init reaps the orphan a moment later (a zombie still answers).
    wait_for(lambda: not alive(child), 5, f"the child {child} gone", every=0.05)


def test_run_command_nonzero_exit_and_missing_program():
    with pytest.raises(CommandFailed) as caught:
        run_command(["sh", "-c", "echo oops >&2; exit 3"], timeout=5, env=os.environ)
    assert caught.value.kind == "exit" and "3" in str(caught.value)
    with pytest.raises(CommandFailed):
        run_command(["/nonexistent/sinfo"], timeout=5, env=os.environ)
    assert run_command(["sh", "-c", "echo warn >&2; echo ok"], timeout=5, env=os.environ) == "ok\n"
