"""Per-job monotonic I/O totals from /proc/<pid>/io samples taken at successive scrapes.

/proc/<pid>/io covers a process, its exited threads and the children it reaped (the
kernel adds a child's counters to its parent's when the parent waits for it). A sum over
a job's live processes therefore drops when a counted process is reaped by a process
that is not counted: slurmstepd (the batch script, each step's tasks), init or a
subreaper (orphans). To keep the job's counters from going down, ``IoTotals`` remembers,
per job, each counted process's last counters and parent, and when a process is gone:

- if its last-known parent is still a counted process of the job, the parent is assumed
  to have reaped it, so its I/O is now in the parent's counters: nothing to do;
- if its parent is gone too (in the same interval), the same question is asked of the
  parent's parent, and so on: a chain of processes that waited for each other ends in a
  live job process holding all their I/O, or outside the job;
- otherwise it was reaped outside the job: its last counters move to the job's
  ``retired`` totals, which are added to the live sum from then on.

The result is also clamped to never go below the previous result, because the rules
above cannot see everything: a child that has exited but is not yet reaped (a zombie is
no longer listed in cgroup.procs, and its counters are in no parent yet), a child reaped
between the reads of its parent and of itself, a parent that lets its children be
reaped automatically (SIGCHLD ignored: the counters go nowhere), an orphan reaped by
init that is taken for reaped by its former parent. Prometheus would take any drop for a
counter reset and count the whole value again; holding the previous value instead only
delays I/O until the sum has caught up (or loses it, when the drop is permanent).

Processes are identified by (pid, starttime), so a reused pid is a new process. State is
kept only for the jobs passed to ``retain`` and only for their processes seen in the last
update: bounded by the processes on the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from jobs_exporter.procfs import IoCounters

Key = tuple[int, int]  # (pid, starttime)
ZERO = IoCounters(0, 0, 0, 0)


class Proc(NamedTuple):
    """One counted process of a job in one scrape."""

    pid: int
    starttime: int
    ppid: int
    io: IoCounters


class Counted(Protocol):
    """A process with its counters read: a ``Proc``, or a ``ProcessSample`` whose ``io``
    is not None."""

    @property
    def pid(self) -> int: ...
    @property
    def starttime(self) -> int: ...
    @property
    def ppid(self) -> int: ...
    @property
    def io(self) -> IoCounters: ...


@dataclass
class _JobState:
    # Counted processes of the last update, as passed (their ``io`` the last counters),
    # and each one's parent when the parent was a counted process of the job too.
    procs: Mapping[Key, Counted] = field(default_factory=dict)
    parents: dict[Key, Key | None] = field(default_factory=dict)
    retired: IoCounters = ZERO  # last counters of processes reaped outside the job
    emitted: IoCounters | None = None  # the last result (the clamp's floor)


class IoTotals:
    """Monotonic I/O totals per job; ``update`` once per scrape and job, then ``retain``."""

    def __init__(self) -> None:
        self._jobs: dict[str, _JobState] = {}

    def update(self, job_id: str, procs: Iterable[Counted]) -> IoCounters | None:
        """The job's totals now: live sum + retired, never below the previous result.

        ``procs``: the job's processes whose /proc/<pid>/io was read in this scrape (``io``
        not None; the scrape's own samples are passed as they are, not copied). None
        when there is nothing to report: no process and no earlier result for the job (a
        0 would be a false counter reset).
        """
        now = {(p.pid, p.starttime): p for p in procs}
        state = self._jobs.get(job_id)
        if state is None:
            if not now:
                return None
            state = self._jobs[job_id] = _JobState()
        last = state.procs
        if now.keys() != last.keys():  # processes came or went: retire, find parents
            gone = {key: state.parents[key] for key in last.keys() - now.keys()}
            retired = state.retired
            for key in gone:
                if not _kept_in_live_ancestor(key, gone, now):
                    retired = _add(retired, last[key].io)
            state.retired = retired
            by_pid = {pid: (pid, start) for pid, start in now}
            state.parents = {key: _parent_key(by_pid, p) for key, p in now.items()}
        # The same processes (most scrapes): their parents stand, only the counters move.
        state.procs = now
        # Plain int sums: this runs for every process of the node on every scrape.
        r, w, sr, sw = state.retired
        for p in now.values():
            io = p.io
            r += io[0]
            w += io[1]
            sr += io[2]
            sw += io[3]
        total = IoCounters(r, w, sr, sw)
        if state.emitted is not None:
            total = _max(total, state.emitted)
        state.emitted = total
        return total

    def retain(self, job_ids: Iterable[str]) -> None:
        """Forget every job not in ``job_ids`` (ended, or no longer on this node)."""
        keep = set(job_ids)
        for job_id in [j for j in self._jobs if j not in keep]:
            del self._jobs[job_id]

    def __len__(self) -> int:
        return len(self._jobs)

    def snapshot(self) -> dict[str, Any]:
        """Every job's state as JSON values (jobs_exporter/state.py)."""
        return {job_id: {"procs": [[*key, *(s.parents[key] or (None, None)), *p.io]
                                   for key, p in s.procs.items()],
                         "retired": list(s.retired),
                         "emitted": None if s.emitted is None else list(s.emitted)}
                for job_id, s in self._jobs.items()}

    def restore(self, data: Mapping[str, Any]) -> None:
        """The state of ``snapshot``: the next update finds the processes gone since as it
        would after one long interval."""
        for job_id, s in data.items():
            procs: dict[Key, Counted] = {}
            parents: dict[Key, Key | None] = {}
            for pid, start, ppid, pstart, *io in s["procs"]:
                parents[(pid, start)] = None if ppid is None else (ppid, pstart)
                procs[(pid, start)] = Proc(pid, start, ppid or 0, IoCounters(*io))
            emitted = s.get("emitted")
            self._jobs[job_id] = _JobState(procs, parents, IoCounters(*s["retired"]),
                                           None if emitted is None else IoCounters(*emitted))


def _parent_key(by_pid: dict[int, Key], proc: Counted) -> Key | None:
    """The key of ``proc``'s parent among the counted processes, if it is there.

    ``ppid`` may be older than this scrape (the exporter reads it once per process), so
    the parent may have exited and its pid gone to a newer process: a process that
    started after ``proc`` cannot be its parent.
    """
    parent = by_pid.get(proc.ppid)
    if parent is None or parent[1] > proc.starttime:
        return None
    return parent


def _kept_in_live_ancestor(
    key: Key, gone: dict[Key, Key | None], now: Mapping[Key, Counted]
) -> bool:
    """True when the last-known parent chain of a gone process, through processes gone in
    the same interval, reaches a live counted process of the job."""
    seen = {key}
    parent = gone[key]
    while parent is not None and parent not in seen:
        if parent in now:
            return True
        if parent not in gone:
            return False  # not counted at the last update (cannot happen; be safe)
        seen.add(parent)
        parent = gone[parent]
    return False


def _add(a: IoCounters, b: IoCounters) -> IoCounters:
    return IoCounters(
        a.read_bytes + b.read_bytes,
        a.write_bytes + b.write_bytes,
        a.syscr + b.syscr,
        a.syscw + b.syscw,
    )


def _max(a: IoCounters, b: IoCounters) -> IoCounters:
    return IoCounters(
        max(a.read_bytes, b.read_bytes),
        max(a.write_bytes, b.write_bytes),
        max(a.syscr, b.syscr),
        max(a.syscw, b.syscw),
    )
