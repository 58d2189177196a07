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
interval yet, so a job's first scrape reports no busy-task figure. The interval is at
least ``MIN_BUSY_INTERVAL``: a second scraper (an HA Prometheus pair, whose two servers
may scrape at the same instant, or a curl by hand) gets the figure of the last interval
that long, not one measured over milliseconds, where a thread's wait so far is not yet in
its counters (the kernel adds a wait when the thread gets its CPU) and reads as idle.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from jobs_exporter.procfs import TaskTimes

BUSY_SHARE = 0.5
MIN_BUSY_INTERVAL = 1.0  # seconds
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
    # Busy tasks are measured from these threads' times, taken at ``base_at``: the last
    # update at least MIN_BUSY_INTERVAL after the one before it.
    base: dict[int, TaskTimes] = field(default_factory=dict)
    base_at: float | None = None
    busy: int | None = None  # the last figure measured


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
        since = now - state.base_at if state.base_at is not None else 0.0
        busy_ns = BUSY_SHARE * since / _NS if since >= MIN_BUSY_INTERVAL else None
        seen: dict[int, TaskTimes] = {}
        busy = 0
        io_on = True
        known, base = state.tasks, state.base
        same = base is known  # one scraper: the busy interval starts at the last update
        wait_ns = 0
        for task in tasks:  # the hot loop: one pass per thread of the node's jobs
            tid, run, wait, blkio = task
            seen[tid] = task
            before = known.get(tid)
            then = before if same else base.get(tid)
            if (busy_ns is not None and then is not None and then.run_ns <= run
                    and then.wait_ns <= wait
                    and run - then.run_ns + wait - then.wait_ns >= busy_ns):
                busy += 1
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
        state.cpu_wait_ns += wait_ns
        state.tasks = seen
        if busy_ns is not None or state.base_at is None:
            state.base, state.base_at = seen, now
            state.busy = busy if busy_ns is not None else None
        return Waits(
            cpu_wait_seconds=state.cpu_wait_ns * _NS,
            io_wait_seconds=state.io_wait_ticks / _USER_HZ if io_on and seen else None,
            busy_tasks=state.busy,
        )

    def retain(self, job_ids: Iterable[str]) -> None:
        """Forget every job not in ``job_ids`` (ended)."""
        keep = set(job_ids)
        self._jobs = {j: s for j, s in self._jobs.items() if j in keep}

    def snapshot(self) -> dict[str, Any]:
        """Every job's sums and its threads' last times as JSON values (jobs_exporter/state.py)."""
        return {job_id: {"tasks": [list(t) for t in s.tasks.values()],
                         "cpu_wait_ns": s.cpu_wait_ns, "io_wait_ticks": s.io_wait_ticks}
                for job_id, s in self._jobs.items()}

    def restore(self, data: Mapping[str, Any]) -> None:
        """The sums of ``snapshot``: the next update adds each thread's growth since then.
        Busy tasks are measured again from that update (no interval to measure yet)."""
        for job_id, s in data.items():
            tasks = {t[0]: TaskTimes(*t) for t in s["tasks"]}
            self._jobs[job_id] = _JobState(tasks, int(s["cpu_wait_ns"]),
                                           int(s["io_wait_ticks"]))
