"""PDF requests: a finished job's PDF from the host's store, else a build in one of the
host's slots (``webapp.renderers.pdf_store``); 503 with Retry-After when no slot frees up
within ``WAIT_SECONDS``, so a burst of PDF requests never starts more LaTeX runs than the
host allows, however many workers and threads take requests.

A build runs in a process of the worker's own at nice ``PDF_NICE`` (``JOBREPORT_PDF_
PROCESS``): its ~1 s of matplotlib holds Python's lock, so in the worker it stalled every
other request thread of that worker, and at nice 0 it took the CPU the pages needed.
There, an ended job's PDF is built in the background: the request waits ``INLINE_WAIT``
seconds for it, then answers 202 with a page that reloads itself until the PDF is kept
(a request thread never sits waiting for a build slot while pages queue behind it)."""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict

from werkzeug.exceptions import ServiceUnavailable

from webapp.model import JobReport
from webapp.renderers.charts import Chart, chart_refs
from webapp.renderers.pdf_store import NoSlot, PdfStore, final
from webapp.renderers.presentation import CHARTS

WAIT_SECONDS = 5.0
RETRY_AFTER = 10  # seconds: a couple of PDF builds
CHARTS_SUFFIX = ".svg.json"
PDF_NICE = 10
# Seconds a request waits for a background build before answering 202. Short: a sync
# worker waiting here serves nobody else (0.5 s tied up half of four workers at 50 people).
INLINE_WAIT = 0.1
BACKGROUND_WAIT = 600.0  # seconds a background build waits for the host's slot


class PdfBusy(ServiceUnavailable):
    """Every PDF slot of the host stayed busy for WAIT_SECONDS."""

    description = ("Too many PDF reports are being built right now. Try again in a few "
                   "seconds.")

    def __init__(self) -> None:
        super().__init__(retry_after=RETRY_AFTER)


def _lower_priority() -> None:
    os.nice(PDF_NICE)


def _build_and_keep(store: PdfStore, report: JobReport, key: str,
                    render: Callable[[JobReport], bytes]) -> bytes:
    """In the builder process: wait for a host slot, build, keep (the report is final)."""
    store.wait = BACKGROUND_WAIT
    return store.build(report, render, key)


class PdfBuilds:
    """The web's side of the store: kept PDFs, or a build that may answer 503."""

    def __init__(self, store: PdfStore, in_process: bool = False) -> None:
        self.store = store
        self.in_process = in_process
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._pending: dict[str, Future[bytes]] = {}  # background builds of this worker, by key
        self._failed: dict[str, BaseException] = {}  # a background build's error, told once

    def cached(self, key: str) -> bytes | None:
        return self.store.get(key)

    def pending(self, key: str) -> bool:
        """This worker is building ``key`` in the background (a reload of the 202 page
        needs no report built again to say so)."""
        with self._lock:
            return key in self._pending

    def build(self, report: JobReport, render: Callable[[JobReport], bytes],
              key: str) -> bytes | None:
        """``render(report)`` (``pdf.render``, its footer bound) in a host slot; with
        ``in_process`` the builder process renders it instead (``render`` is pickled: a
        module's function or a partial of one), an ended job's in the background: None
        when it is not done within ``INLINE_WAIT`` (the caller answers 202)."""
        if self.in_process and final(report):
            with self._lock:
                failed = self._failed.pop(key, None)
            if isinstance(failed, NoSlot):  # the reload after a failed build hears of it
                raise PdfBusy() from failed
            if failed is not None:
                raise failed
            future = self._background(report, key, render)
            try:
                return future.result(timeout=INLINE_WAIT)
            except FutureTimeout:
                return None
            except NoSlot:
                raise PdfBusy() from None
        if self.in_process:
            render = functools.partial(self._in_builder, render)
        try:
            return self.store.build(report, render, key)
        except NoSlot:
            raise PdfBusy() from None

    def _builder(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:  # spawned, not forked: the worker has threads
                self._pool = ProcessPoolExecutor(
                    self.store.slots, multiprocessing.get_context("spawn"),
                    initializer=_lower_priority)
            return self._pool

    def _in_builder(self, render: Callable[[JobReport], bytes], report: JobReport) -> bytes:
        return self._builder().submit(render, report).result()

    def _background(self, report: JobReport, key: str,
                    render: Callable[[JobReport], bytes]) -> Future[bytes]:
        """The build of ``key`` under way in this worker, or a new one."""
        pool = self._builder()
        with self._lock:
            future = self._pending.get(key)
            if future is None:
                future = pool.submit(_build_and_keep, self.store, report, key, render)
                self._pending[key] = future
                future.add_done_callback(lambda done: self._forget(key, done))
        return future

    def _forget(self, key: str, done: Future[bytes]) -> None:
        with self._lock:
            self._pending.pop(key, None)
            error = done.exception()
            if error is not None:
                self._failed[key] = error

    def charts(self, report: JobReport, key: str) -> list[Chart]:
        """The page's SVG plots, drawn: kept with the PDF once the job is final (drawn
        once for every worker: a second request waits for the first's), else this
        worker's LRU (``presentation.CHARTS``)."""
        if not final(report):
            return CHARTS.get(report)
        try:
            kept = self.store.build(report, _charts_json, key, slot=False,
                                    suffix=CHARTS_SUFFIX)
        except NoSlot:  # another request drew them for longer than the wait
            raise PdfBusy() from None
        return [Chart(**c) for c in json.loads(kept)]

    def chart_refs(self, report: JobReport, key: str) -> list[Chart]:
        """The page's list of plots (name, title, summary), each loaded as an image of its
        own: the kept ones', else built without drawing."""
        kept = self.store.get(key, CHARTS_SUFFIX) if final(report) else None
        if kept is not None:
            return [Chart(c["name"], c["title"], c["summary"], "") for c in json.loads(kept)]
        return chart_refs(report)


def _charts_json(report: JobReport) -> bytes:
    return json.dumps([asdict(c) for c in CHARTS.get(report)]).encode()
