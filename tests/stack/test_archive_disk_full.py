"""The archive's disk full while `jobreport sync` runs over real ended jobs: the sync
stops with a clear error naming the archive and the full disk (exit status 1), the
archive is not corrupted (``PRAGMA integrity_check``, every row it held still there), the
watermark is not moved past a job it could not archive; once space is freed the next
run archives and emails every job, each exactly once.

Isolated from the shared stack's other tests: the archive and outbox are SQLite files of
the test's own on a tmpfs of the test's own (a few MiB, unmounted in teardown), the jobs
are the test's own, the emails' PDFs are cached in the test's own directory and go to a
loopback SMTP server of its own.

The test reads the archive read-only and closes each connection at once: a connection
``with sqlite3.connect(...)`` leaves open (``with`` only commits; the statement cache's
reference cycle keeps it until the garbage collector runs) held the archive's WAL open
across the sync's runs, and when this process then opened an Archive, ``prepare`` used to
drop that connection's locks (``jobreport_common.sqlite_file.setting_up``), so the sync
deleted the WAL under it: "database disk image is malformed" after the last run.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from tests.helpers import stack
from tests.helpers.sync import jobreport, mail_env, start_watermarks, sync_past_stand_ins
from webapp.archive.store import Archive

JOBS = 2  # the queue may be long: each job of the test's own waits in it
SIZE = "32m"  # the filesystem: room for the archive, an outbox and their journals


@pytest.fixture
def small_disk(tmp_path: Path):
    """A tmpfs of ``SIZE`` mounted under the test's directory; unmounted afterwards."""
    where = tmp_path / "disk"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs",
                    str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave: int = 0) -> Path:
    """A file taking every free byte of ``disk`` but ``leave``."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (65536, 512):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def ends(ids: list[str]) -> dict[str, int]:
    """job id -> end (unix seconds), from sacct."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,End", "-j", ",".join(ids)],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "SLURM_TIME_FORMAT": "%s"}).stdout
    return {j: int(e) for j, e in (line.split("|") for line in out.split())}


def failed_sync(env: dict[str, str], url: str) -> tuple[str, float]:
    """`jobreport sync` that must fail on the full disk, saying so; its output, seconds."""
    t = time.monotonic()
    done = jobreport(env, "sync")
    took = time.monotonic() - t
    out = done.stdout + done.stderr
    print(f"\nsync on a full disk: exit {done.returncode} after {took:.1f} s:\n{out[-1500:]}")
    assert done.returncode == 1, out
    # Said plainly, naming the file and its disk; no traceback.
    assert "Traceback" not in out, out
    assert any("disk is full" in line and url in line for line in out.splitlines()), out
    return out, took


def read_only(path: str) -> closing[sqlite3.Connection]:
    """A read-only connection, closed when the ``with`` block ends."""
    return closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def archived(url: str) -> Counter:
    """(job id, submit time) -> how many archive rows hold it."""
    with read_only(url) as db:
        return Counter(db.execute("SELECT job_id, submit_time FROM archive_jobs").fetchall())


def integrity(path: str) -> str:
    with read_only(path) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def test_disk_full_stops_the_sync_and_loses_nothing(stack_env: dict[str, str], smtp,
                                                    small_disk: Path, tmp_path: Path) -> None:
    recorder, port = smtp
    # pdflatex found on the PATH; the emails' PDFs cached in the test's own directory,
    # off the small disk: the fault is the archive's and the outbox's. One email a day per
    # user, the rest folded into the digest: the window holds other suites' jobs of alice
    # and bob too, and a PDF each would take minutes.
    env = {**mail_env(stack_env, small_disk, port), "PATH": os.environ["PATH"],
           "JOBREPORT_PDF_CACHE_DIR": str(tmp_path / "pdf-cache"),
           "JOBREPORT_MAIL_DAILY_CAP": "1",
           # No look-back before the watermark: the window is this test's jobs' (a run
           # re-reads the last 6 h otherwise, hundreds of other suites' jobs).
           "JOBREPORT_SYNC_LOOKBACK": "0"}
    url = env["JOBREPORT_ARCHIVE_URL"]
    jobs = [stack.StackJob(f"disk-full-{i}", "alice" if i % 2 else "bob",
                           ("-c1", "--mem=50M", "--time=2", *stack.off_debug("gpu4")),
                           "sleep 1") for i in range(JOBS)]
    ids = [stack.submit(job) for job in jobs]
    stack.wait_until_done(ids)
    # Both streams start just before the first of them ended: the jobs of other suites
    # that ended while these waited in the queue (hundreds when it is long) stay out.
    start_watermarks(env, min(ends(ids).values()) - 1)

    # A first run archives the oldest ended job: the other is left for the run on the full
    # disk (with --limit 2 both went, and that run found nothing to do on a quiet stack).
    sync_past_stand_ins(env, "--limit", "1")
    before = archived(url)
    assert before and all(n == 1 for n in before.values()), before

    # Room for the run to start and write a little, not for every job: it stops mid-run.
    filler = fill(small_disk, leave=96 * 1024)
    failed_sync(env, url)
    assert integrity(url) == "ok"
    mid = archived(url)
    assert all(mid[k] == 1 for k in before) and all(n == 1 for n in mid.values()), mid
    with Archive(url) as archive:
        mark = archive.watermark("demo", "archive")
    # The watermark is never past a job not archived (the look-back aside, a later run
    # starts at it).
    missing = [j for j in ids if j not in {k for k, _ in mid}]
    if missing:
        assert mark is not None and mark <= min(ends(missing).values()), (mark, missing)

    # No room at all: the run cannot even open its files.
    filler.unlink()
    filler = fill(small_disk)
    failed_sync(env, url)
    filler.unlink()  # SQLite opens even a read with a file of its own beside the archive
    assert integrity(url) == "ok"
    assert archived(url) == mid, "the rows held before the disk filled changed"
    with Archive(url) as archive:
        assert archive.watermark("demo", "archive") == mark

    # Runs of DEFAULT_LIMIT jobs each until this test's are in (others' ended meanwhile).
    for _ in range(5):
        sync_past_stand_ins(env)
        final = archived(url)
        if set(ids) <= {j for j, _ in final}:
            break
    assert integrity(url) == "ok"
    assert all(n == 1 for n in final.values()), final
    mine = {j for j, _ in final} & set(ids)
    assert mine == set(ids), f"not archived: {set(ids) - mine}"
    with Archive(url) as archive:
        emailed = Counter(j for j, _, _ in archive.outcomes("demo", "email"))
    assert all(emailed[j] == 1 for j in ids), emailed
    # No email sent twice.
    assert all(n == 1 for n in Counter(recorder.jobs()).values()), recorder.jobs()
