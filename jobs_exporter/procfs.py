"""Per-process facts from /proc: pure ``parse_*`` functions and the ``read_*`` I/O around them.

A process can exit between any two reads; every reader returns None (or skips it)
on FileNotFoundError/ProcessLookupError instead of failing the scrape.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Iterable
from typing import NamedTuple

log = logging.getLogger(__name__)

# Errors that mean "this process (or its cgroup) is gone": skip it, never fail.
GONE = (FileNotFoundError, ProcessLookupError)
_GONE_ERRNOS = {errno.ENOENT, errno.ESRCH, errno.ENODEV}
_IO_KEYS = ["syscr:", "syscw:", "read_bytes:", "write_bytes:"]
_IO_KEYS_BYTES = [k.encode() for k in _IO_KEYS]
# slurmstepd's process title: "[<job id>.<step>]", the step "batch", "extern",
# "interactive" or a number, "+<component>" for a heterogeneous step's part, and since
# 24.05 " stepmgr" when the step manager runs in it (slurmstepd.c: _set_job_log_prefix).
_STEPD_TITLE = re.compile(rb"slurmstepd: \[(\d+)\.[0-9A-Za-z]+(?:\+\d+)?(?: [a-z]+)?\]")


class StatFields(NamedTuple):
    ppid: int
    num_threads: int
    starttime: int  # clock ticks after boot; identifies the process across pid reuse


class IoCounters(NamedTuple):
    read_bytes: int
    write_bytes: int
    syscr: int
    syscw: int


class TaskTimes(NamedTuple):
    """One thread's scheduler times: /proc/<pid>/task/<tid>/schedstat (and stat)."""

    tid: int
    run_ns: int  # on a CPU
    wait_ns: int  # runnable, waiting for a CPU (run delay)
    blkio_ticks: int | None  # blocked on block I/O, USER_HZ; None: delay accounting off


class ProcessSample(NamedTuple):
    pid: int
    starttime: int  # with pid, identifies the process across pid reuse
    ppid: int
    threads: int
    open_files: int | None  # None: fd directory unreadable (not root)
    open_files_limit: int | None  # soft RLIMIT_NOFILE; None: unlimited or unreadable
    io: IoCounters | None  # None: /proc/<pid>/io unreadable
    # Every thread's scheduler times; None: no schedstat (a kernel without
    # CONFIG_SCHED_INFO, or a captured tree without the files)
    tasks: tuple[TaskTimes, ...] | None = None


def parse_stat(text: str) -> StatFields:
    """Parse /proc/<pid>/stat.

    ``26231 (vim) R 5392 7446 5392 34835 7446 4218880 32533 309516 ...``
    comm may contain spaces and parentheses, so split at the LAST ``)``.
    """
    rest = text[text.rindex(")") + 2 :].split(None, 20)
    # rest[0] is field 3 (state); ppid is field 4, num_threads field 20, starttime field 22.
    return StatFields(ppid=int(rest[1]), num_threads=int(rest[17]), starttime=int(rest[19]))


def parse_schedstat(data: str | bytes) -> tuple[int, int]:
    """(ns on a CPU, ns waiting for one) from /proc/<pid>/task/<tid>/schedstat.

    ``38321469 26169228 179``  (the third field counts timeslices)
    Per thread: /proc/<pid>/schedstat is the main thread's alone, not the process's.
    """
    run, wait = data.split(None, 2)[:2]
    return int(run), int(wait)


def parse_blkio_ticks(text: str | bytes) -> int:
    """Field 42 of /proc/<pid>/task/<tid>/stat, ``delayacct_blkio_ticks``: USER_HZ ticks
    the thread waited for block I/O (counted only with ``kernel.task_delayacct=1``).

    ``30830 (python3) S 30820 ... 0 0 0 0 0 ...`` (split after the last ``)``, as parse_stat)
    """
    data = text.encode("latin-1") if isinstance(text, str) else text
    return int(data[data.rindex(b")") + 2 :].split()[39])  # field 3 is index 0


def parse_io(text: str | bytes) -> IoCounters:
    """Parse /proc/<pid>/io.

    ``rchar: 750339``
    ``read_bytes: 1024``
    """
    words = text.split()
    # The kernel writes these keys in this order (fs/proc/base.c); check, don't assume.
    keys = words[4:12:2]
    if keys == _IO_KEYS_BYTES or keys == _IO_KEYS:
        return IoCounters(int(words[9]), int(words[11]), int(words[5]), int(words[7]))
    named = (text.decode("latin-1") if isinstance(text, bytes) else text).split()
    values = dict(zip(named[::2], named[1::2], strict=False))
    return IoCounters(
        read_bytes=int(values["read_bytes:"]),
        write_bytes=int(values["write_bytes:"]),
        syscr=int(values["syscr:"]),
        syscw=int(values["syscw:"]),
    )


def parse_nofile_limit(text: str) -> int | None:
    """Soft "Max open files" from /proc/<pid>/limits; None when unlimited or absent.

    ``Limit                     Soft Limit           Hard Limit           Units``
    ``Max open files            2048                 4096                 files``
    """
    start = text.find("\nMax open files")
    if start < 0:
        return None
    soft = text[start + len("\nMax open files") :].split(None, 1)[0]
    return None if soft == "unlimited" else int(soft)


def parse_status_field(text: str, key: str) -> str | None:
    """First value of ``key`` in /proc/<pid>/status.

    ``Tgid:\\t26231``
    ``Uid:\\t1000\\t1000\\t1000\\t0``  (real, effective, saved, fs: the first is the owner)
    """
    prefix = key + ":"
    for line in text.splitlines():
        if line.startswith(prefix):
            fields = line[len(prefix) :].split()
            return fields[0] if fields else None
    return None


def parse_stepd_job_id(cmdline: bytes) -> str | None:
    """The job id in a slurmstepd's process title (``/proc/<pid>/cmdline``); None when the
    process is not a job's slurmstepd.

    ``slurmstepd: [30.batch]\\0``  (array task 29_1: its own id, sacct's JobIDRaw)
    ``/usr/sbin/slurmstepd\\0infinity\\0``  (slurmd's stepd holding the scope: no job)
    """
    title = cmdline.split(b"\0", 1)[0].rstrip()
    match = _STEPD_TITLE.fullmatch(title)
    return match.group(1).decode("ascii") if match else None


def normalize_prefixes(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(os.path.normpath(p) for p in paths if p)


def path_under(path: str, prefixes: Iterable[str]) -> bool:
    """True when ``path`` is one of ``prefixes`` or below one, on whole path components.

    ``/scratch2/x`` is not under ``/scratch``; a deleted file (``/scratch/x (deleted)``)
    still is.
    """
    if not path.startswith("/"):
        return False  # socket:[123], pipe:[456], anon_inode:...
    for prefix in prefixes:
        if prefix == "/" or path == prefix or path.startswith(prefix + "/"):
            return True
    return False


def is_gone(exc: OSError) -> bool:
    return isinstance(exc, GONE) or exc.errno in _GONE_ERRNOS


def read_text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def read_status_field(proc_root: str, pid: int, key: str) -> str | None:
    try:
        return parse_status_field(read_text(f"{proc_root}/{pid}/status"), key)
    except OSError as exc:
        if is_gone(exc):
            return None
        raise


def read_stepd_job_id(proc_root: str, pid: int) -> str | None:
    """The job id in process ``pid``'s slurmstepd title; None when it is none, exited, or
    its cmdline cannot be read (procfs mounted with ``hidepid``)."""
    try:
        with open(f"{proc_root}/{pid}/cmdline", "rb") as f:
            return parse_stepd_job_id(f.read(4096))
    except OSError as exc:
        if is_gone(exc) or isinstance(exc, PermissionError):
            return None
        raise


def read_uid(proc_root: str, pid: int) -> int | None:
    value = read_status_field(proc_root, pid, "Uid")
    return int(value) if value is not None else None


def uses_scratch(proc_root: str, pids: Iterable[int], prefixes: tuple[str, ...]) -> bool:
    """True when any process has its cwd or an open file under one of ``prefixes``.

    Stops at the first hit, so a busy job costs one readlink, an idle one all of them.
    """
    if not prefixes:
        return False
    for pid in pids:
        base = f"{proc_root}/{pid}"
        try:
            if path_under(os.readlink(f"{base}/cwd"), prefixes):
                return True
            fd_dir = f"{base}/fd"
            for name in os.listdir(fd_dir):
                try:
                    if path_under(os.readlink(f"{fd_dir}/{name}"), prefixes):
                        return True
                except OSError as exc:
                    if not is_gone(exc):
                        raise  # a closed fd is normal; anything else is a real problem
        except OSError as exc:
            if not (is_gone(exc) or isinstance(exc, PermissionError)):
                raise
    return False
