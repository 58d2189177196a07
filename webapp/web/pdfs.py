"""PDF builds per worker process: a bounded number at once, finished ones of ended jobs kept.

A PDF runs latexmk (~1 s of CPU, two pdflatex passes): without a bound, a burst of PDF
requests starts as many LaTeX runs as there are request threads and starves the host.
A request that cannot start a build within ``WAIT_SECONDS`` gets 503 with Retry-After.
A finished job's report does not change, so its PDF is kept (least recently used first
out, within a byte budget) unless the report has gaps, which a later request may fill.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from werkzeug.exceptions import ServiceUnavailable

from webapp.model import JobReport

WAIT_SECONDS = 5.0
RETRY_AFTER = 10  # seconds: a couple of PDF builds


class PdfBusy(ServiceUnavailable):
    """Every PDF slot of this worker stayed busy for WAIT_SECONDS."""

    description = ("Too many PDF reports are being built right now. Try again in a few "
                   "seconds.")

    def __init__(self) -> None:
        super().__init__(retry_after=RETRY_AFTER)


class PdfBuilds:
    """At most ``limit`` concurrent builds; up to ``cache_mb`` MB of finished PDFs."""

    def __init__(self, limit: int, cache_mb: float, wait: float = WAIT_SECONDS) -> None:
        self.slots = threading.BoundedSemaphore(limit)
        self.max_bytes = int(cache_mb * 2**20)
        self.wait = wait
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def cached(self, job_id: str) -> bytes | None:
        with self._lock:
            body = self._cache.get(job_id)
            if body is not None:
                self._cache.move_to_end(job_id)
            return body

    def build(self, report: JobReport, render: Callable[[JobReport], bytes],
              key: str | None = None) -> bytes:
        """``render(report)`` in a free slot (PdfBusy if none frees up), cached if final
        under ``key`` (the job id; the cluster too when ids repeat across clusters)."""
        if not self.slots.acquire(timeout=self.wait):
            raise PdfBusy()
        try:
            body = render(report)
        finally:
            self.slots.release()
        if final(report):
            self._keep(key or report.job_id, body)
        return body

    def _keep(self, job_id: str, body: bytes) -> None:
        if len(body) > self.max_bytes:
            return
        with self._lock:
            old = self._cache.pop(job_id, None)
            self._bytes += len(body) - (len(old) if old else 0)
            self._cache[job_id] = body
            while self._bytes > self.max_bytes:
                _, dropped = self._cache.popitem(last=False)
                self._bytes -= len(dropped)


def final(report: JobReport) -> bool:
    """Ended, with every source answering: its PDF will not change."""
    return report.end_time is not None and not report.unfinished and not report.gaps
