"""Readers answering from records fetched in bulk, and from the live source otherwise.

The sync fetches a batch of jobs' accounting rows in one query and their sacct records
in one ``sacct -j a,b,c``; the report build then reads them through the same protocols
as one job's, never knowing they were fetched together.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from webapp.model import AccountingJob, JobId, SacctJob
from webapp.sources.ended import EndedJob


class PrefetchedAccounting:
    """An ``AccountingReader`` (and queue history) over prefetched rows, else ``live``."""

    name = "accounting"

    def __init__(self, live: Any, jobs: Mapping[str, AccountingJob]) -> None:
        self.live = live
        self.prefetched = dict(jobs)
        self._limits: dict[str, dict[float, int]] = {}

    def job(self, job_id: JobId) -> AccountingJob:
        found = self.prefetched.get(str(job_id))
        return found if found is not None else self.live.job(job_id)

    def ended_since(self, since: datetime) -> list[str]:
        return self.live.ended_since(since)

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        return self.live.ended_between(since, until, limit)

    def requested_gpu_types(self, job_id: JobId) -> tuple[str, ...]:
        return self.live.requested_gpu_types(job_id)

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
        return self.live.array(job_id)
