"""Per-job CPU wait, I/O wait and busy tasks from per-thread scheduler times, between scrapes.

A thread's ``schedstat`` run delay (ns waiting for a CPU) and ``delayacct_blkio_ticks``
grow while it lives and vanish with it, so a sum over live threads goes down whenever one
exits. ``WaitTotals`` therefore adds up, per job, each thread's growth since the scrape
before (a thread seen for the first time adds all it has: it waited inside the job, which
holds every process from its start); the growth of a thread's last interval before it
exited is what is lost. Threads are keyed by tid; a tid whose counters went down is a new
thread on a reused tid.

Busy tasks: the threads that were on a CPU or waiting for one (run + run delay) for at
least ``BUSY_SHARE`` of the wall time since the previous scrape. That holds with any
scrape interval: a thread spinning on a core shared by four still counts (25 % run, 75 %
wait), a thread that sleeps most of the interval does not. A thread's first scrape has no
interval yet, so a job's first scrape reports no busy-task figure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from exporter.procfs import TaskTimes

BUSY_SHARE = 0.5
_NS = 1e-9
_USER_HZ = os.sysconf("SC_CLK_TCK")


class Waits(NamedTuple):
    cpu_wait_seconds: float
    io_wait_seconds: float | None  # None: delay accounting off
    busy_tasks: int | None  # None: the job's first scrape (no interval yet)


@dataclass
class _JobState:
    tasks: dict[int, TaskTimes] = field(default_factory=dict)
    cpu_wait_ns: int = 0
    io_wait_ticks: int = 0
    at: float | None = None  # monotonic time of the last update


def _growth(now: int, before: int | None) -> int:
    if before is None or now < before:  # new thread (or a reused tid): all of it
        return now
    return now - before


class WaitTotals:
    """Per-job monotonic wait counters and the busy-task count (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: dict[str, _JobState] = {}

    def update(self, job_id: str, tasks: Iterable[TaskTimes], now: float) -> Waits:
        state = self._jobs.setdefault(job_id, _JobState())
        interval_ns = (now - state.at) / _NS if state.at is not None else None
        seen: dict[int, TaskTimes] = {}
        busy = 0
        io_on = True
        known = state.tasks
        busy_ns = BUSY_SHARE * interval_ns if interval_ns else None
        wait_ns = 0
        for task in tasks:  # the hot loop: one pass per thread of the node's jobs
            tid, run, wait, blkio = task
            seen[tid] = task
            before = known.get(tid)
            if before is not None and before.run_ns <= run and before.wait_ns <= wait:
                run -= before.run_ns
                wait -= before.wait_ns
            else:
                before = None  # new, or a reused tid: all of it is new
            wait_ns += wait
            if blkio is None:
                io_on = False
            else:
                state.io_wait_ticks += _growth(blkio, before.blkio_ticks if before else None)
            if before is not None and busy_ns is not None and run + wait >= busy_ns:
                busy += 1
        state.cpu_wait_ns += wait_ns
        first = state.at is None
        state.tasks, state.at = seen, now
        return Waits(
            cpu_wait_seconds=state.cpu_wait_ns * _NS,
            io_wait_seconds=state.io_wait_ticks / _USER_HZ if io_on and seen else None,
            busy_tasks=None if first else busy,
        )

    def retain(self, job_ids: Iterable[str]) -> None:
        """Forget every job not in ``job_ids`` (ended)."""
        keep = set(job_ids)
        self._jobs = {j: s for j, s in self._jobs.items() if j in keep}
