"""The report's ``#SBATCH`` block, looked up beside the rest of the build and kept a while.

The owner's history is one more sacct call (and a PromQL query): it starts on a small
shared thread pool as soon as the owner and the job name are known, and the report waits
for it only at the end. Answers are kept per (cluster, user, job name) for
JOBREPORT_SIZING_CACHE_SECONDS, so a page, its PDF and its JSON ask sacct once; a report
asking while the same lookup runs waits for that one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from cachetools import TTLCache

T = TypeVar("T")

# Each lookup is mostly a wait on sacct and Prometheus; a few at once per process is plenty
# (a gunicorn worker serves a handful of threads), more queue here rather than on slurmdbd.
WORKERS = 4
CACHE_SIZE = 256
# A failed lookup is a gap ("Data from history unavailable: ..."), as a failed source's is:
# the web app then keeps the report only briefly and does not cache its PDF. Its own source,
# not sacct's: the report's figures from sacct stand, and the audit says so.
GAP_SOURCE = "history"
UNAVAILABLE = "{source}: {reason}; no #SBATCH block for the next submission"


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def shared_pool() -> ThreadPoolExecutor:
    """This process' pool: one made before a fork (gunicorn's workers) would hand work to
    threads that do not exist in the child."""
    pid = os.getpid()
    with _pools_lock:
        if pid not in _pools:
            _pools.clear()
            _pools[pid] = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="sizing")
        return _pools[pid]


class SizingCache(Generic[T]):
    """Lookups by key, run on ``pool`` (default: ``shared_pool()``); each answer kept ``ttl``
    seconds, at most ``size`` of them (a TTLCache: the least recently used dropped first).
    ``ttl`` 0 keeps nothing. A failed lookup is forgotten as soon as it fails: the next
    report asks again."""

    def __init__(self, ttl: float, size: int = CACHE_SIZE,
                 pool: ThreadPoolExecutor | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size, self.pool = ttl, size, pool
        self._items: TTLCache[Hashable, Future[T]] | None = (
            TTLCache(size, ttl, timer=clock) if ttl > 0 and size > 0 else None)
        self._lock = threading.Lock()  # a TTLCache is not thread-safe

    def get(self, key: Hashable, lookup: Callable[[], T]) -> Future[T]:
        """The answer kept (or being looked up) under ``key``, else ``lookup()`` started."""
        with self._lock:
            hit = None if self._items is None else self._items.get(key)
            if hit is not None:
                return hit
            future = (self.pool or shared_pool()).submit(lookup)
            if self._items is not None:
                self._items[key] = future
        future.add_done_callback(lambda f: self._forget_failed(key, f))
        return future

    def _forget_failed(self, key: Hashable, future: Future[T]) -> None:
        if future.cancelled() or future.exception() is not None:
            with self._lock:
                if self._items is not None and self._items.get(key) is future:
                    del self._items[key]

    def __len__(self) -> int:
        with self._lock:
            return 0 if self._items is None else len(self._items)
