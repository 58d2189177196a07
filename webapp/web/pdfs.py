"""PDF requests: a finished job's PDF from the host's store, else a build in one of the
host's slots (``webapp.renderers.pdf_store``); 503 with Retry-After when no slot frees up
within ``WAIT_SECONDS``, so a burst of PDF requests never starts more LaTeX runs than the
host allows, however many workers and threads take requests.

A build runs in a process of the worker's own at nice ``PDF_NICE`` (``JOBREPORT_PDF_
PROCESS``): its ~1 s of matplotlib holds Python's lock, so in the worker it stalled every
other request thread of that worker, and at nice 0 it took the CPU the pages needed."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict

from werkzeug.exceptions import ServiceUnavailable

from webapp.model import JobReport
from webapp.renderers.charts import Chart
from webapp.renderers.pdf_store import NoSlot, PdfStore, final
from webapp.renderers.presentation import CHARTS

WAIT_SECONDS = 5.0
RETRY_AFTER = 10  # seconds: a couple of PDF builds
CHARTS_SUFFIX = ".svg.json"
PDF_NICE = 10


class PdfBusy(ServiceUnavailable):
    """Every PDF slot of the host stayed busy for WAIT_SECONDS."""

    description = ("Too many PDF reports are being built right now. Try again in a few "
                   "seconds.")

    def __init__(self) -> None:
        super().__init__(retry_after=RETRY_AFTER)


def _lower_priority() -> None:
    os.nice(PDF_NICE)


def _render(report: JobReport) -> bytes:  # in the builder process
    from webapp.renderers import pdf

    return pdf.render(report)


class PdfBuilds:
    """The web's side of the store: kept PDFs, or a build that may answer 503."""

    def __init__(self, store: PdfStore, in_process: bool = False) -> None:
        self.store = store
        self.in_process = in_process
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def cached(self, key: str) -> bytes | None:
        return self.store.get(key)

    def build(self, report: JobReport, render: Callable[[JobReport], bytes], key: str) -> bytes:
        """``render(report)`` (``pdf.render``) in a host slot; with ``in_process`` the
        builder process renders it instead."""
        if self.in_process:
            render = self._in_builder
        try:
            return self.store.build(report, render, key)
        except NoSlot:
            raise PdfBusy() from None

    def _in_builder(self, report: JobReport) -> bytes:
        with self._lock:
            if self._pool is None:  # spawned, not forked: the worker has threads
                self._pool = ProcessPoolExecutor(
                    self.store.slots, multiprocessing.get_context("spawn"),
                    initializer=_lower_priority)
        return self._pool.submit(_render, report).result()

    def charts(self, report: JobReport, key: str) -> list[Chart]:
        """The page's SVG plots: kept with the PDF once the job is final, else this
        worker's LRU (``presentation.CHARTS``)."""
        if not final(report):
            return CHARTS.get(report)
        kept = self.store.get(key, CHARTS_SUFFIX)
        if kept is not None:
            return [Chart(**c) for c in json.loads(kept)]
        charts = CHARTS.get(report)
        self.store.put(key, json.dumps([asdict(c) for c in charts]).encode(), CHARTS_SUFFIX)
        return charts
