"""Reading cgroup files: by path, or kept open between scrapes (``OpenFiles``).

A file of a cgroup removed under us fails with ENODEV; it reads as FileNotFoundError, like
a missing file, so callers can tell a job that ended (see cgroupfs.exists).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable

from jobs_exporter import proc_reader

log = logging.getLogger(__name__)

_CHUNK = 65536
_SHORT = 2048


def read(path: str, files: OpenFiles | None = None) -> str:
    """A cgroup file's text, through ``files`` when given; a removed cgroup's file raises
    FileNotFoundError."""
    if files is not None:
        return files.read(path)
    # os.open/os.read: a third of the cost of open() with a text wrapper.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = _read_fd(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _gone_if_removed(exc, path) from None
    return data.decode("ascii")


def _read_fd(fd: int) -> bytes:
    # A seq_file read returns the records that fit in about a page (cgroup.procs of a job
    # with 5,000 processes takes several reads), so read until an empty read; but a read
    # shorter than _SHORT had room for the next line (cgroup lines are far shorter): EOF.
    data = os.pread(fd, _CHUNK, 0)
    if len(data) < _SHORT:
        return data
    chunks = [data]
    offset = len(data)
    while more := os.pread(fd, _CHUNK, offset):
        chunks.append(more)
        offset += len(more)
    return b"".join(chunks)


def _gone_if_removed(exc: OSError, path: str) -> OSError:
    if exc.errno == errno.ENODEV:  # read through a cgroup removed under us
        return FileNotFoundError(exc.errno, exc.strerror, path)
    return exc


class OpenFiles:
    """Cgroup files kept open between scrapes and re-read with ``pread`` (no open/close).

    A file of a removed cgroup fails with ENODEV, which reads as FileNotFoundError like a
    missing file. ``retain`` closes the files of jobs no longer found. At most
    ``max_open`` files stay open; the rest (and all, once the process runs out of fds)
    are read by path. Not thread-safe.
    """

    def __init__(self, max_open: int = proc_reader.CGROUP_FILES_MAX) -> None:
        self._fds: dict[str, int] = {}
        # directory -> its files opened (``retain`` compares directories, not each path:
        # a dirname per file per scrape was 0.4 ms for 64 jobs' 576 files)
        self._dirs: dict[str, set[str]] = {}
        self.max_open = max_open

    def read(self, path: str) -> str:
        fd = self._fds.get(path)
        if fd is None and len(self._fds) >= self.max_open:
            return read(path)
        try:
            if fd is None:
                try:
                    fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                    self._dirs.setdefault(os.path.dirname(path), set()).add(path)
                except OSError as exc:
                    if exc.errno not in proc_reader.OUT_OF_FDS:
                        raise
                    log.warning("out of file descriptors: keeping %d cgroup files", len(self))
                    self.max_open = len(self._fds)
                    return read(path)
            return _read_fd(fd).decode("ascii")
        except OSError as exc:
            self._close(path)
            raise _gone_if_removed(exc, path) from None

    def retain(self, job_dirs: Iterable[str]) -> None:
        for directory in self._dirs.keys() - set(job_dirs):
            for path in self._dirs.pop(directory):
                self._close(path)

    def close(self) -> None:
        self.retain(())

    def __len__(self) -> int:
        return len(self._fds)

    def _close(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)


def read_optional(path: str, files: OpenFiles | None = None) -> str | None:
    """None when the file does not exist (old kernel, controller not enabled)."""
    try:
        return read(path, files)
    except FileNotFoundError:
        if not os.path.isdir(os.path.dirname(path)):
            raise  # the cgroup itself is gone: the job ended
        return None
    except OSError as exc:
        if exc.errno == errno.EOPNOTSUPP:  # PSI compiled in but disabled (psi=0)
            return None
        raise
