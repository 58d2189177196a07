"""Readers answering from records fetched in bulk, and from the live source otherwise.

The sync fetches a batch of jobs' accounting rows in one query and their sacct records
in one ``sacct -j a,b,c``; the report build then reads them through the same protocols
as one job's, never knowing they were fetched together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from webapp.model import AccountingJob, JobId, NodeEvent, SacctJob, SourceUnavailable
from webapp.sources.accounting import NODE_EVENTS_LIMIT
from webapp.sources.ended import EndedJob
from webapp.sources.protocols import NodeEventReader


class PrefetchedAccounting:
    """An ``AccountingReader`` (and queue history) over prefetched rows, else ``live``."""

    name = "accounting"

    def __init__(self, live: Any, jobs: Mapping[str, AccountingJob],
                 events_window: tuple[datetime, datetime] | None = None) -> None:
        self.live = live
        self.prefetched = dict(jobs)
        self._limits: dict[str, dict[float, int]] = {}
        # The batch's node events: one query over every job's run (``events_window``),
        # then each job's filtered from it, as its accounting rows are.
        self._events_window = events_window
        self._events: tuple[NodeEvent, ...] | None = None

    def node_events(self, nodes: Iterable[str] | None, start: datetime, end: datetime
                    ) -> tuple[NodeEvent, ...]:
        if not isinstance(self.live, NodeEventReader):
            raise SourceUnavailable(self.name, "no node events without the accounting view")
        window = self._events_window
        if window is None or start < window[0] or end > window[1]:
            return self.live.node_events(nodes, start, end)
        if self._events is None:
            self._events = self.live.node_events(None, *window)
        if len(self._events) >= NODE_EVENTS_LIMIT:  # cut off: each job's own query
            return self.live.node_events(nodes, start, end)
        wanted = None if nodes is None else set(nodes)
        return tuple(e for e in self._events if start <= e.start <= end
                     and (wanted is None or e.node in wanted))

    def job(self, job_id: JobId) -> AccountingJob:
        found = self.prefetched.get(str(job_id))
        return found if found is not None else self.live.job(job_id)

    def ended_since(self, since: datetime) -> list[str]:
        return cast("list[str]", self.live.ended_since(since))

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        return cast("list[EndedJob]", self.live.ended_between(since, until, limit))

    def requested_gpu_types(self, job_id: JobId) -> tuple[str, ...]:
        return cast("tuple[str, ...]", self.live.requested_gpu_types(job_id))

    def time_limits(self, partition: str, since: datetime) -> dict[float, int]:
        # The same for every job of a batch (a 30-day window moved by seconds): ask once.
        if partition not in self._limits:
            self._limits[partition] = self.live.time_limits(partition, since)
        return self._limits[partition]


class PrefetchedSacct:
    """A ``SacctReader`` over prefetched records, else ``live``."""

    name = "sacct"

    def __init__(self, live: Any, jobs: Mapping[str, SacctJob]) -> None:
        self.live = live
        self.prefetched = dict(jobs)

    def job(self, job_id: JobId) -> SacctJob:
        found = self.prefetched.get(str(job_id))
        return found if found is not None else self.live.job(job_id)

    def array(self, job_id: JobId) -> tuple[SacctJob, ...]:
        return cast("tuple[SacctJob, ...]", self.live.array(job_id))
