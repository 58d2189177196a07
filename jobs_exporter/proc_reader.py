"""ProcReader: every job process read once per scrape, with kept-open fds and a time budget.

The parsing is in jobs_exporter/procfs.py; this module owns the file descriptors: which
processes keep /proc files open (``fd_budget``), reading through them, and falling back
to reading by path.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import time
from collections.abc import Iterable, Sequence
from typing import Any

from jobs_exporter.procfs import (
    IoCounters,
    ProcessSample,
    StatFields,
    TaskTimes,
    is_gone,
    parse_blkio_ticks,
    parse_io,
    parse_nofile_limit,
    parse_schedstat,
    parse_stat,
    read_text,
)

log = logging.getLogger(__name__)

OUT_OF_FDS = {errno.EMFILE, errno.ENFILE}
# Kept-open files: fds left for everything else (sockets, cgroup.procs, listings).
FD_RESERVE = 256
CGROUP_FILES_MAX = 4096
_READ_SIZE = 8192


class ProcReader:
    """Samples the job processes once per scrape, within a time budget, into ``samples``.

    With the cache, /proc/<pid>/io stays open between scrapes and is re-read with
    ``os.pread``; ``limits`` is read once per process (only prlimit changes it). A cached
    fd stays bound to the process it was opened for: once that process exits, pread
    fails with ESRCH even if the pid was reused. Where the kernel counts a process's
    threads in the link count of /proc/<pid>/task (procfs, detected once), ``stat`` is
    read once per process too (ppid and starttime do not change; the thread count comes
    from an ``fstat``): /proc/<pid>/stat is the costliest file of the three (10 of 20 ms
    for 2,000 processes). Otherwise ``stat`` stays open as well, its starttime a second
    guard. Open files are counted with one ``stat`` of /proc/<pid>/fd where the kernel
    reports the count as its size (Linux >= 6.2, detected once), else by listing it.
    Scheduler times come per thread (``tasks``): a single-threaded process's from its
    kept-open ``schedstat``, which is then its only thread's; a multi-threaded one's from
    a listing of ``task/`` and each thread's ``schedstat``, read by path. With delay
    accounting on (``kernel.task_delayacct=1``, checked every refresh), each thread's
    ``stat`` is read too, for its block I/O wait.

    ``refresh`` reads the processes least recently read first; past the deadline the
    rest keep their previous sample (``stale``). Not thread-safe: the caller serialises
    scrapes.
    """

    def __init__(self, proc_root: str, cache: bool = True, max_cached: int | None = None):
        self.proc_root = proc_root
        self.cache = cache
        if max_cached is None:
            max_cached = fd_budget()[0]
        self.max_cached = max_cached
        # pid -> [starttime, stat fd | None (read once), io fd | None,
        #         soft nofile limit | None, fd dir fd | None, task dir fd | None, ppid,
        #         schedstat fd | None, (schedstat bytes, sample) | None of
        #         the last read by _read_kept]
        self._open: dict[int, list[Any]] = {}  # mixed types: indexed on the hot path
        self.samples: dict[int, ProcessSample] = {}
        self._last_read: dict[int, int] = {}  # pid -> refresh round it was last read in
        # pid -> (starttime, soft nofile limit) of processes read by path (past the cache)
        self._limits: dict[int, tuple[int, int | None]] = {}
        self._round = 0
        self.stale = 0  # processes not read in the last refresh
        self._fd_size_counts = fd_dir_size_is_count(proc_root)
        self._task_nlink_counts = task_dir_nlink_is_count(proc_root)
        # True/False: procfs with/without schedstat; None: a captured tree (no ``self``),
        # read where a process's task/ was captured.
        self._schedstat: bool | None = (
            os.path.exists(f"{proc_root}/self/schedstat")
            if os.path.isdir(f"{proc_root}/self") else None
        )
        self.delayacct = False  # kernel.task_delayacct, read at every refresh

    def refresh(self, pids: Sequence[int], budget: float = 0.0) -> int:
        """Read ``pids`` (least recently read first) until ``budget`` seconds have passed
        (0: no limit); forget every other pid. Returns how many were not read."""
        self._round += 1
        rnd = self._round
        self.delayacct = delayacct = delayacct_on(self.proc_root)
        live = set(pids)
        samples, last, opened = self.samples, self._last_read, self._open
        # Set differences (in C), not a pass in Python over every pid: most scrapes find
        # no process gone.
        for pid in samples.keys() - live:
            del samples[pid]
        for pid in last.keys() - live:
            del last[pid]
        for pid in self._limits.keys() - live:
            del self._limits[pid]
        self.sweep(live)
        if not budget:
            order: Iterable[int] = live
        elif self.stale:  # the last refresh stopped early: the least recently read first
            order = sorted(live, key=lambda p: last.get(p, -1))
        else:  # every known pid was read last time: the new ones first (no sort)
            new = live - last.keys()
            order = [*new, *(live - new)] if new else live
        deadline = time.perf_counter() + budget if budget else None
        read = 0
        read_kept = self._read_kept
        for pid in order:
            # Checked every 32 reads, after the first 32: every scrape makes progress.
            if deadline is not None and read and read % 32 == 0 and time.perf_counter() > deadline:
                break
            read += 1
            last[pid] = rnd
            entry = opened.get(pid)
            sample = None
            if entry is not None and entry[1] is None and entry[7] is not None and not (
                    delayacct or entry[4] is None):
                sample = read_kept(pid, entry)
            if sample is None:
                sample = self.read(pid)
                if sample is None:
                    samples.pop(pid, None)
                    continue
            samples[pid] = sample
        self.stale = len(live) - read
        return self.stale

    def read(self, pid: int) -> ProcessSample | None:
        """One process's sample, or None when it has exited."""
        try:
            entry = self._open.get(pid)
            if entry is not None:
                sample = self._read_open(pid, entry)
                if sample is not None:
                    return sample
                self._forget(pid)  # exited, pid reused or odd read: by path below
            if self.cache and len(self._open) < self.max_cached:
                try:
                    return self._open_and_read(pid)
                except OSError as exc:
                    if exc.errno not in OUT_OF_FDS:
                        raise
                    # Another part of the process holds more fds than budgeted: cache no
                    # more, read this process (and later ones) by path.
                    log.warning("out of file descriptors: caching %d processes", len(self._open))
                    self.max_cached = len(self._open)
            found = self._read_paths(pid)
            if found is None:
                return None
            stat, io, limit = found
            return ProcessSample(
                pid, stat.starttime, stat.ppid, stat.num_threads, self._count_fds(pid), limit,
                io, self._read_tasks(pid, stat.num_threads, None),
            )
        except OSError as exc:
            if is_gone(exc):
                self._forget(pid)
                return None
            raise

    def _read_kept(self, pid: int, entry: list[Any]) -> ProcessSample | None:
        """The hottest path, a single-threaded process with io, task/, fd/ and schedstat
        kept open (most job processes). None: another case, or an error; ``read`` does it.

        Its thread's ``schedstat`` first: where the kernel answers the same bytes (run
        time, wait and timeslices), the thread has not run since the last scrape, so
        nothing it counts can have moved: its I/O counters move in its own system calls
        and page faults, a child's are added when it waits for the child, and only it
        opens or closes its files. Its previous sample stands, after two system calls
        (2,000 sleeping processes: 16.8 -> 8.4 ms). Otherwise io and fd/ are read too,
        four in all, and parsed."""
        try:
            if os.fstat(entry[5]).st_nlink != 3:  # not exactly one thread (or exited)
                return None
            sched = os.pread(entry[7], 128, 0)  # ESRCH once the process exited
            last: tuple[bytes, ProcessSample] | None = entry[8]
            if last is not None and last[0] == sched:
                return last[1]
            io = os.pread(entry[2], 1024, 0)
            fds = os.fstat(entry[4]).st_size
        except OSError:
            return None
        try:
            run, wait = parse_schedstat(sched)
            sample = ProcessSample(pid, entry[0], entry[6], 1, fds, entry[3], parse_io(io),
                                   (TaskTimes(pid, run, wait, None),))
        except (ValueError, IndexError):
            return None  # an empty or cut read of an exiting process
        entry[8] = (sched, sample)
        return sample

    def _read_open(self, pid: int, entry: list[Any]) -> ProcessSample | None:
        """The hot path: pread of the kept io fd (and stat, when threads are not counted
        by ``fstat`` of the task directory), fstat of the fd directory."""
        starttime, stat_fd, io_fd, limit, fd_dir, task_dir, ppid, sched_fd, _ = entry
        io: IoCounters | None
        try:
            if stat_fd is None:  # io_fd and task_dir are open: see _open_and_read
                io = parse_io(os.pread(io_fd, 1024, 0))  # ESRCH once the process exited
                threads = os.fstat(task_dir).st_nlink - 2
                if threads < 1:
                    return None  # exited right after the io read
            else:
                data = os.pread(stat_fd, 1024, 0)
                rest = data[data.rindex(b")") + 2 :].split(None, 20)
                if int(rest[19]) != starttime:
                    return None
                ppid, threads = int(rest[1]), int(rest[17])
                io = parse_io(os.pread(io_fd, 1024, 0)) if io_fd is not None else None
            tasks = self._read_tasks(pid, threads, sched_fd)
        except ValueError:
            return None  # empty or cut read of an exiting process
        except OSError as exc:
            if is_gone(exc):
                return None
            raise
        fds = os.fstat(fd_dir).st_size if fd_dir is not None else self._count_fds(pid)
        return ProcessSample(pid, starttime, ppid, threads, fds, limit, io, tasks)

    def _read_tasks(
        self, pid: int, threads: int, sched_fd: int | None
    ) -> tuple[TaskTimes, ...] | None:
        """Every thread's scheduler times (see the class docstring); None without
        schedstat. Raises a GONE error when the process exited."""
        if sched_fd is not None and threads == 1 and not self.delayacct:  # the hot path
            run, wait = parse_schedstat(os.pread(sched_fd, 128, 0))
            return (TaskTimes(pid, run, wait, None),)
        if self._schedstat is False:
            return None
        base = f"{self.proc_root}/{pid}/task"
        if self._schedstat is None and not os.path.isdir(base):
            return None
        if threads == 1 and not self.delayacct:  # the process's file is its thread's
            run, wait = parse_schedstat(read_text(f"{self.proc_root}/{pid}/schedstat"))
            return (TaskTimes(pid, run, wait, None),)
        out = []
        for name in os.listdir(base):
            try:
                run, wait = parse_schedstat(read_text(f"{base}/{name}/schedstat"))
                blkio = (
                    parse_blkio_ticks(read_text(f"{base}/{name}/stat")) if self.delayacct else None
                )
            except OSError as exc:
                if is_gone(exc):
                    continue  # the thread exited; the others are still counted
                raise
            out.append(TaskTimes(int(name), run, wait, blkio))
        return tuple(out)

    def forget_samples(self) -> None:
        """Drop the kept samples: the next ``refresh`` reads and parses every process as
        if each had run since (bench/bench_exporter.py's busy case)."""
        for entry in self._open.values():
            entry[8] = None

    def sweep(self, live: set[int]) -> None:
        """Close the cached fds of processes not in ``live``."""
        for pid in self._open.keys() - live:
            self._forget(pid)

    def close(self) -> None:
        self.sweep(set())
        self.samples.clear()
        self._last_read.clear()
        self._limits.clear()

    def _read_path(self, pid: int, name: str) -> str | None:
        try:
            return read_text(f"{self.proc_root}/{pid}/{name}")
        except PermissionError:
            if name == "stat":
                raise
            return None  # io/limits of another user's process when not root

    def _read_paths(self, pid: int) -> tuple[StatFields, IoCounters | None, int | None] | None:
        text = self._read_path(pid, "stat")
        if not text:
            return None
        stat = parse_stat(text)
        io = self._read_path(pid, "io")
        known = self._limits.get(pid)
        if known is not None and known[0] == stat.starttime:
            limit = known[1]  # limits are read once per process, cached or not
        else:
            limits = self._read_path(pid, "limits")
            limit = parse_nofile_limit(limits) if limits else None
            if self.cache:
                self._limits[pid] = (stat.starttime, limit)
        return stat, parse_io(io) if io else None, limit

    def _count_fds(self, pid: int) -> int | None:
        path = f"{self.proc_root}/{pid}/fd"
        if self._fd_size_counts:
            return os.stat(path).st_size
        try:
            return len(os.listdir(path))
        except PermissionError:
            return None

    def _open_and_read(self, pid: int) -> ProcessSample | None:
        fds: list[int | None] = []
        try:
            fds.append(self._open_fd(pid, "stat"))
            fds.append(self._open_fd(pid, "io"))
            if self._fd_size_counts:
                fds.append(self._open_fd(pid, "fd", os.O_DIRECTORY))
            else:
                fds.append(None)
            # Threads by fstat only where io is readable: its ESRCH is then the exit guard.
            if self._task_nlink_counts and fds[1] is not None:
                fds.append(self._open_fd(pid, "task", os.O_DIRECTORY))
            else:
                fds.append(None)
            fds.append(self._open_fd(pid, "schedstat") if self._schedstat else None)
            texts = [_pread(fd) for fd in fds[:2]]
            limits = self._read_path(pid, "limits")
            if not texts[0]:
                _close_all(fds)
                return None
            stat = parse_stat(texts[0])
            open_files = os.fstat(fds[2]).st_size if fds[2] is not None else self._count_fds(pid)
            tasks = self._read_tasks(pid, stat.num_threads, fds[4])
        except OSError:
            _close_all(fds)  # e.g. the process exited between opening stat and io
            raise
        limit = parse_nofile_limit(limits) if limits else None
        stat_fd = fds[0]  # open: its text was read
        if fds[3] is not None and stat_fd is not None:  # stat is not re-read: keep 4 fds
            os.close(stat_fd)  # per process, as budgeted
            fds[0] = None
        self._open[pid] = [
            stat.starttime, fds[0], fds[1], limit, fds[2], fds[3], stat.ppid, fds[4], None
        ]
        io = parse_io(texts[1]) if texts[1] else None
        return ProcessSample(
            pid, stat.starttime, stat.ppid, stat.num_threads, open_files, limit, io, tasks
        )

    def _open_fd(self, pid: int, name: str, flags: int = 0) -> int | None:
        try:
            return os.open(f"{self.proc_root}/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC | flags)
        except PermissionError:
            if name == "stat":
                raise
            return None

    def _forget(self, pid: int) -> None:
        entry = self._open.pop(pid, None)
        if entry is not None:
            _close_all((entry[1], entry[2], entry[4], entry[5], entry[7]))


def fd_dir_size_is_count(proc_root: str) -> bool:
    """Whether ``stat(<proc>/<pid>/fd).st_size`` is the number of open fds (Linux >= 6.2).

    Older kernels report 0; a captured tree is no procfs at all. Needs root, like the
    listing it replaces, to count other users' processes.
    """
    path = f"{proc_root}/self/fd"
    if os.geteuid() != 0 or not os.path.isdir(path):
        return False
    size = os.stat(path).st_size
    return size > 0 and size == len(os.listdir(path)) - 1  # the listing holds one fd more


def task_dir_nlink_is_count(proc_root: str) -> bool:
    """Whether ``stat(<proc>/<pid>/task).st_nlink`` is 2 + the process's threads.

    procfs adds the thread count to the task directory's link count (``proc_task_getattr``
    in fs/proc/base.c); a captured tree is a plain directory. Checked on this process.
    """
    path = f"{proc_root}/self/task"
    if not os.path.isdir(path):
        return False
    return os.stat(path).st_nlink - 2 == len(os.listdir(path))


def delayacct_on(proc_root: str) -> bool:
    """Whether the kernel counts per-task I/O wait (``sysctl kernel.task_delayacct``).

    Off, ``delayacct_blkio_ticks`` stays 0: an I/O wait of 0 would be a false reading.
    """
    try:
        return read_text(f"{proc_root}/sys/kernel/task_delayacct").strip() == "1"
    except OSError:
        return False


def _pread(fd: int | None) -> str | None:
    if fd is None:
        return None
    return os.pread(fd, _READ_SIZE, 0).decode("ascii", errors="replace")


def _close_all(fds: Iterable[int | None]) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def fd_budget(soft: int | None = None) -> tuple[int, int]:
    """(processes the /proc cache may hold, cgroup files that may stay open).

    Each cached process holds 4 fds (io, schedstat, fd and task directories; or stat, io,
    schedstat and fd);
    cgroup files get up to an eighth of the soft RLIMIT_NOFILE (at most CGROUP_FILES_MAX);
    FD_RESERVE stays free.
    """
    if soft is None:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    cgroup_files = min(CGROUP_FILES_MAX, max(0, soft // 8))
    return max(0, (soft - FD_RESERVE - cgroup_files) // 4), cgroup_files
