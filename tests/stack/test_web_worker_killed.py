"""A web worker killed (SIGKILL, as the OOM killer does) while it builds a job's PDF:
that request fails, gunicorn's master starts a new worker, the same login goes on
working, the web state's SQLite file stays sound, and the next PDF request gets a whole
PDF, never a half-written one from the shared PDF cache.

Isolated from the shared stack's other tests: the gunicorn serving the app is the test's
own (this checkout's code, a free port, its own JOBREPORT_WEB_STATE file and PDF cache
under tmp_path, no control socket: gunicorn's default path is shared; stopped in
teardown); the stack's web app is never touched. The PDF is built in the request's own
thread (JOBREPORT_PDF_PROCESS=0), so the request lasts the whole build and the worker
that takes it is the one whose CPU time grows. The job is a recent ended one of alice's,
read from the stack's Prometheus.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
import requests

from tests.helpers import stack
from tests.helpers.mail import free_port
from tests.helpers.sync import known
from tests.helpers.wait import wait_for

WORKERS = 2
GUNICORN = str(Path(sys.executable).parent / "gunicorn")


class OwnWeb:
    """gunicorn serving ``webapp:create_app()`` as scripts/dev-stack starts the stack's."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "gunicorn.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [GUNICORN, "--bind", f"127.0.0.1:{self.port}", "--workers", str(WORKERS),
                 "--timeout", "60", "--no-control-socket", "--chdir", str(stack.ROOT),
                 "webapp:create_app()"],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def workers(self) -> set[int]:
        """The master's live child processes (its workers)."""
        pid = self.proc.pid
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return set()
        return {int(k) for k in kids}

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def cpu_ticks(pid: int) -> int:
    """User + system clock ticks of ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def recent_job() -> str:
    """A job of alice's that ended recently (Prometheus still holds it): the session
    batch's busy CPU job, once it ended (a fresh stack has no other)."""
    job_id = stack.session_batch()["busy"]
    stack.wait_until_done([job_id], timeout=1800)
    return job_id


@pytest.fixture
def web(stack_env: dict[str, str], tmp_path: Path) -> Iterator[OwnWeb]:
    env = {**known(stack_env), "PATH": os.environ["PATH"],
           "JOBREPORT_WEB_STATE": str(tmp_path / "web-state.sqlite"),
           "JOBREPORT_PDF_CACHE_DIR": str(tmp_path / "pdf-cache"),
           "JOBREPORT_PDF_PROCESS": "0"}
    own = OwnWeb(tmp_path, env)
    try:
        wait_for(lambda: _ok(f"{own.base}/healthz") and len(own.workers()) == WORKERS, 60,
                 f"gunicorn on {own.base} with {WORKERS} workers")
        yield own
    finally:
        own.stop()
        print(f"\ngunicorn log:\n{own.log.read_text()[-1500:]}")


def _ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).ok
    except requests.RequestException:
        return False


def test_worker_killed_mid_pdf(web: OwnWeb, tmp_path: Path) -> None:
    job = recent_job()
    session = stack.login(web.base, "alice")
    assert session.get(f"{web.base}/jobs/{job}.json", timeout=60).ok  # the report loads
    before = web.workers()
    ticks = {pid: cpu_ticks(pid) for pid in before}

    answer: list[object] = []

    def slow() -> None:
        try:
            answer.append(session.get(f"{web.base}/jobs/{job}.pdf", timeout=120))
        except requests.RequestException as exc:
            answer.append(exc)

    asking = threading.Thread(target=slow)
    asked = time.monotonic()
    asking.start()
    # The worker building it: the one whose CPU time grows (0.2 s in, the build is well
    # under way and not near its end: it takes seconds).
    def building() -> int | None:
        if not asking.is_alive():
            raise AssertionError(f"the PDF request ended before the kill: {answer}")
        return next((p for p in before if cpu_ticks(p) - ticks[p] >= 20), None)

    busy = wait_for(building, 60, lambda: f"a worker busy with the PDF: {ticks} -> "
                    f"{ {p: cpu_ticks(p) for p in before} }", every=0.02)
    os.kill(busy, signal.SIGKILL)
    killed_after = time.monotonic() - asked
    asking.join(130)
    failed = answer[0]
    # The request fails: the connection drops, or the master answers 5xx.
    assert isinstance(failed, requests.ConnectionError) or (
        isinstance(failed, requests.Response) and failed.status_code >= 500), failed

    # The master replaces it.
    t = time.monotonic()
    wait_for(lambda: busy not in web.workers() and len(web.workers()) == WORKERS, 60,
             "a new worker in place of the killed one")
    replaced = time.monotonic() - t
    # The same login goes on (its cookie is signed, its state on disk).
    page = session.get(f"{web.base}/jobs/{job}.json", timeout=60, allow_redirects=False)
    assert page.status_code == 200, (page.status_code, page.headers.get("Location"))
    with closing(sqlite3.connect(f"file:{tmp_path / 'web-state.sqlite'}?mode=ro",
                                 uri=True)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    # The next PDF is whole, and so is every PDF the cache keeps.
    t = time.monotonic()
    pdf = session.get(f"{web.base}/jobs/{job}.pdf", timeout=120)
    rebuilt = time.monotonic() - t
    assert pdf.status_code == 200, pdf.status_code
    assert pdf.content.startswith(b"%PDF") and pdf.content.rstrip().endswith(b"%%EOF")
    text = subprocess.run(["pdftotext", "-", "-"], input=pdf.content, capture_output=True,
                          check=True).stdout.decode()
    assert job in text
    kept = list((tmp_path / "pdf-cache").rglob("*.pdf"))
    assert kept and all(p.read_bytes().rstrip().endswith(b"%%EOF") for p in kept), kept
    leftovers = list((tmp_path / "pdf-cache").rglob("*.tmp"))
    print(f"\njob {job}: worker {busy} killed {killed_after:.1f} s into the PDF request"
          f" ({type(failed).__name__}); replaced in {replaced:.1f} s; next PDF"
          f" {len(pdf.content)} bytes in {rebuilt:.1f} s; PDFs kept {len(kept)};"
          f" temporary files left {len(leftovers)}")
