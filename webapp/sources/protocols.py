"""What the report needs of each source: a job id in, model records out.

The report builder and the service see only these protocols, so a test (or another
store) can stand in for any source without knowing how the real one queries.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from webapp.model import AccountingJob, JobId, SacctJob, TimeLimitKind, Usage


class AccountingReader(Protocol):
    """Slurm's accounting database, read through the restricted view."""

    def job(self, job_id: JobId) -> AccountingJob: ...

    def ended_since(self, since: datetime) -> list[str]: ...


class SacctReader(Protocol):
    """The ``sacct`` command: steps, TotalCPU and MaxRSS."""

    def job(self, job_id: JobId) -> SacctJob: ...

    def array(self, job_id: JobId) -> tuple[SacctJob, ...]: ...


class MetricsReader(Protocol):
    """A Prometheus-compatible query API holding the exporter's jobs_* series."""

    def usage(self, job_id: JobId, start: datetime, end: datetime,
              nodes: Iterable[str] = ()) -> Usage: ...


class PartitionReader(Protocol):
    """The partitions' own limits: what a job's ``Partition_Limit`` stands for."""

    def max_time(self, partition: str) -> tuple[TimeLimitKind, float | None]: ...
