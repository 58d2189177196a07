"""Finished PDFs of ended jobs (and their web page's plots), kept on disk for every
process of a host, and the host's bound on PDF builds at once.

A PDF costs ~1.7 s of CPU (its plots drawn by matplotlib, two pdflatex passes). Each
web worker kept its own PDFs, so with four workers one job's PDF was built up to four
times, and each worker bounded only its own builds: under 50 people the TeX runs took
the CPU the HTML pages needed. Here every worker (and the sync, which renders the same
PDF for the job's email) shares one directory:

- ``<dir>/<version>/<sha256 of cluster/job>.pdf``: a finished job's report does not
  change, so its PDF is kept (and ``.svg.json``, the page's SVG plots: a matplotlib run
  of ~130 ms a page view otherwise, each worker's own LRU holding only 64 reports);
  written under a temporary name and renamed, so a reader never sees half a file. Least
  recently read first out (a read touches the file's mtime) once the directory holds
  more than the byte budget. A new version starts an empty folder and the old ones are
  removed, so a PDF never outlives the code that drew it.
- ``<dir>/slot-<n>.lock``: ``slots`` builds at once on the host, whichever worker asks
  (``flock``, released by the kernel if a worker dies mid-build).
- ``<dir>/key-<n>.lock``: two requests for one job's PDF build it once; the second waits
  for the first and reads its file.

Clear the directory if the accounting database is recreated (job ids start again).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from jobreport_common.units import MIB
from webapp.model import ARCHIVE_SOURCE, JobReport
from webapp.settings import Settings

# Stripes: a background build holds its key's while it waits for a slot, so two jobs (or
# a job's PDF and its plots) sharing one would wait on each other; 1,024 keep that rare.
KEY_LOCKS = 1024
POLL_SECONDS = 0.05
OLD_RELEASE_SECONDS = 3600


@functools.cache
def code_version() -> str:
    """A digest of the code and templates that draw a PDF: the same on every host that
    runs the same release, new with any change (a version number can stay the same)."""
    root = Path(__file__).resolve().parent.parent.parent
    digest = hashlib.sha256()
    for path in sorted([*(root / "webapp").rglob("*.py"), *(root / "templates").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


class NoSlot(Exception):
    """Every build slot of the host stayed busy for the wait."""


def final(report: JobReport) -> bool:
    """Ended, with every source answering (or its usage from the archive, which no later
    request can improve): its PDF will not change."""
    return (report.end_time is not None and not report.unfinished
            and all(gap.source == ARCHIVE_SOURCE for gap in report.gaps))


class PdfStore:
    """PDFs of ended jobs under ``directory`` within ``budget_bytes``; ``slots`` builds at
    once among all processes using the directory."""

    def __init__(self, directory: str | os.PathLike[str], budget_bytes: int, slots: int,
                 wait: float, version: str | None = None) -> None:
        self.root = Path(directory)
        self.budget = budget_bytes
        self.slots = slots
        self.wait = wait
        self.folder = self.root / (version or code_version())
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)  # users' reports: the service's eyes only
        for old in self.root.iterdir():  # an earlier release's (an hour: a rolling update)
            if (old.is_dir() and old != self.folder
                    and time.time() - old.stat().st_mtime > OLD_RELEASE_SECONDS):
                shutil.rmtree(old, ignore_errors=True)

    def _path(self, key: str, suffix: str) -> Path:
        return self.folder / (hashlib.sha256(key.encode()).hexdigest() + suffix)

    def get(self, key: str, suffix: str = ".pdf") -> bytes | None:
        path = self._path(key, suffix)
        try:
            body = path.read_bytes()
        except FileNotFoundError:
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently read: the last to go
        return body

    def put(self, key: str, body: bytes, suffix: str = ".pdf") -> None:
        """Keep ``body`` (a finished job's PDF, or what ``suffix`` names) under ``key``,
        then trim to the budget."""
        if len(body) > self.budget:
            return
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            os.replace(tmp, self._path(key, suffix))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._trim()

    def _trim(self) -> None:
        files = []
        for entry in os.scandir(self.folder):
            if not entry.name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    st = entry.stat()
                    files.append((st.st_mtime_ns, st.st_size, entry.path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.budget:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            total -= size

    def build(self, report: JobReport, render: Callable[[JobReport], bytes], key: str,
              slot: bool = True, suffix: str = ".pdf") -> bytes:
        """The PDF of ``report``: another process' build of the same key if one finished
        while we waited, else ``render(report)`` in a host slot (NoSlot if none frees up
        within the wait; ``slot=False``: the sync's own build at nice 19, which must not
        hold a slot the web's requests wait for); kept when final."""
        deadline = time.monotonic() + self.wait
        stripe = int(hashlib.sha256((key + suffix).encode()).hexdigest()[:8], 16) % KEY_LOCKS
        with self._lock(f"key-{stripe}.lock", deadline):
            body = self.get(key, suffix)
            if body is not None:
                return body
            with self._slot(deadline) if slot else contextlib.nullcontext():
                body = render(report)
            if final(report):
                self.put(key, body, suffix)
        return body

    @contextlib.contextmanager
    def _slot(self, deadline: float) -> Iterator[None]:
        """The first free ``slot-<n>.lock`` of the host; NoSlot at ``deadline``."""
        while True:
            for n in range(self.slots):
                fd = self._try(f"slot-{n}.lock")
                if fd is not None:
                    try:
                        yield
                    finally:
                        os.close(fd)  # closing releases the lock
                    return
            if time.monotonic() >= deadline:
                raise NoSlot()
            time.sleep(POLL_SECONDS)

    @contextlib.contextmanager
    def _lock(self, name: str, deadline: float) -> Iterator[None]:
        """``<dir>/name`` held; NoSlot at ``deadline``."""
        while (fd := self._try(name)) is None:
            if time.monotonic() >= deadline:
                raise NoSlot()
            time.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            os.close(fd)

    def _try(self, name: str) -> int | None:
        """An open descriptor holding ``flock`` on ``<dir>/name``, or None when another
        holds it."""
        fd = os.open(self.root / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd


def pdf_key(cluster: str, job_id: str, policy_dir: str = "") -> str:
    """One job's key, whoever asks (the web page's link, the email's attachment); with
    the version of the site's footer template (``policy_dir``'s) when it has one, so an
    edited footer is in the next PDF (``site_wording.version``)."""
    from webapp.renderers.site_wording import version

    footer = version(policy_dir, "report_footer")
    return f"{cluster}/{job_id}" + (f"@{footer}" if footer else "")


def pdf_store(settings: Settings, wait: float = 5.0) -> PdfStore:
    """The host's store as ``settings`` place it (one per process and directory)."""
    return _store(settings.pdf_cache_dir, int(settings.pdf_cache_mb * MIB),
                  settings.pdf_builds, wait)


@functools.cache
def _store(directory: str, budget: int, slots: int, wait: float) -> PdfStore:
    return PdfStore(directory, budget, slots, wait)
