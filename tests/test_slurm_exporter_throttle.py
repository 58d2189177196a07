"""Throttling on a fake clock: one run per poll limit whatever it returned, a failing
source's last snapshot served for three poll limits then dropped, and back at the next
good run; commands killed with their process group on timeout. (The real slurm-exporter
on the stack's commands, on a fake clock too: tests/stack/test_slurm_exporter_throttle_live.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_exporter.runner import CommandFailed, run_command
from slurm_exporter.throttle import STALE_POLLS, ThrottledSource
from tests.helpers.slurm_wrappers import alive
from tests.helpers.wait import wait_for


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


def test_a_failing_source_serves_its_snapshot_for_three_poll_limits_then_none_then_back():
    clock = [0.0]
    answers: list = [["job 1"]]

    def fetch() -> list:
        answer = answers[-1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    source = ThrottledSource("squeue", fetch, poll_limit=10, monotonic=lambda: clock[0],
                             wall=lambda: 1_700_000_000 + clock[0])
    assert source.get() == ["job 1"] and source.health.up
    answers.append(CommandFailed("exit", "slurmctld unreachable"))
    clock[0] = 10.0  # the next run fails: the last snapshot served, up=0
    assert source.get() == ["job 1"] and not source.health.up
    assert source.health.snapshot_age_seconds == 10.0
    clock[0] = STALE_POLLS * 10.0  # failed again, at three poll limits: still served
    assert source.get() == ["job 1"] and source.health.snapshot_age_seconds == 30.0
    clock[0] = 30.1  # no run (0.1 s since the last), the snapshot too old: dropped
    assert source.get() is None and source.health.snapshot_age_seconds is None
    assert source.health.runs == 3 and source.health.errors["exit"] == 2
    answers.append(["job 2"])
    clock[0] = 40.0  # back by itself at the next poll limit
    assert source.get() == ["job 2"] and source.health.up
    assert source.health.snapshot_age_seconds == 0.0
    assert source.health.last_success_unix == 1_700_000_040.0


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
