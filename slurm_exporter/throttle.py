"""One run of a command per poll limit, shared by every scrape; the last good snapshot
served while the command fails, for up to ``STALE_POLLS`` poll limits.

The cache is keyed on the time of the last attempt, not on what it returned: an empty
queue is a valid result and is cached like any other (an upstream exporter re-ran
squeue on every scrape while the queue was empty).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from slurm_exporter.runner import CommandFailed

log = logging.getLogger(__name__)
T = TypeVar("T")
STALE_POLLS = 3
ERROR_KINDS = ("timeout", "exit", "parse")


@dataclass
class Health:
    """What the exporter reports about one source."""

    up: bool = False
    duration_seconds: float = 0.0
    last_success_unix: float | None = None
    snapshot_age_seconds: float | None = None  # None: nothing served
    runs: int = 0
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_KINDS, 0))


class ThrottledSource(Generic[T]):
    """``get()`` returns the current snapshot (or None once it is too old to serve).

    ``fetch`` runs the command and parses its output; it raises CommandFailed or
    ValueError (a parse error). Concurrent callers wait for the one run in progress.
    """

    def __init__(
        self,
        name: str,
        fetch: Callable[[], T],
        poll_limit: float,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ):
        self.name = name
        self._fetch = fetch
        self.poll_limit = poll_limit
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._attempted_at: float | None = None
        self._snapshot: T | None = None
        self._snapshot_at: float | None = None
        self.health = Health()

    def get(self) -> T | None:
        with self._lock:
            now = self._monotonic()
            if self._attempted_at is None or now - self._attempted_at >= self.poll_limit:
                self._refresh(now)
                now = self._monotonic()
            return self._serve(now)

    def _refresh(self, now: float) -> None:
        self._attempted_at = now
        self.health.runs += 1
        try:
            snapshot = self._fetch()
        except CommandFailed as exc:
            self._failed(exc.kind, str(exc))
        except ValueError as exc:
            self._failed("parse", f"{self.name}: {exc}")
        else:
            self._snapshot, self._snapshot_at = snapshot, self._monotonic()
            self.health.up = True
            self.health.last_success_unix = self._wall()
        finally:
            self.health.duration_seconds = self._monotonic() - now

    def _failed(self, kind: str, message: str) -> None:
        log.warning("%s failed (%s): %s", self.name, kind, message)
        self.health.up = False
        self.health.errors[kind] += 1

    def _serve(self, now: float) -> T | None:
        if self._snapshot_at is None:
            self.health.snapshot_age_seconds = None
            return None
        age = now - self._snapshot_at
        if age > STALE_POLLS * self.poll_limit:
            self._snapshot = self._snapshot_at = None  # dropped: its series vanish
            self.health.snapshot_age_seconds = None
            return None
        self.health.snapshot_age_seconds = age
        return self._snapshot
