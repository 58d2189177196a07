"""What the report needs of each source: a job id in, model records out.

The report builder and the service see only these protocols, so a test (or another
store) can stand in for any source without knowing how the real one queries.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol, runtime_checkable

from webapp.model import (
    AccountingJob,
    JobId,
    NodeEvent,
    QueueContext,
    SacctJob,
    TimeLimitKind,
    Usage,
)
from webapp.sources.ended import EndedJob


class AccountingReader(Protocol):
    """Slurm's accounting database, read through the restricted view."""

    def job(self, job_id: JobId) -> AccountingJob: ...

    def ended_since(self, since: datetime) -> list[str]: ...

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]: ...


@runtime_checkable
class NodeEventReader(Protocol):
    """Optional of an accounting source: its nodes' down and drain periods (the view
    ``jobreport.node_events``); sacct alone has none."""

    def node_events(self, nodes: Iterable[str] | None, start: datetime, end: datetime
                    ) -> tuple[NodeEvent, ...]: ...


class SacctReader(Protocol):
    """The ``sacct`` command: steps, TotalCPU and MaxRSS."""

    def job(self, job_id: JobId) -> SacctJob: ...

    def array(self, job_id: JobId) -> tuple[SacctJob, ...]: ...


class MetricsReader(Protocol):
    """A Prometheus-compatible query API holding the exporter's jobs_* series."""

    def usage(self, job_id: JobId | tuple[str, ...], start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        """The job's series; a tuple: a het job's component ids, asked together."""


class PartitionReader(Protocol):
    """The partitions' own limits: what a job's ``Partition_Limit`` stands for."""

    def max_time(self, partition: str) -> tuple[TimeLimitKind, float | None]: ...


class ClusterReader(Protocol):
    """slurm-exporter's cluster series: a job's wait in the queue."""

    def queue(self, job_id: str, partition: str | None, submit: datetime,
              start: datetime | None) -> QueueContext: ...


@runtime_checkable
class QueueHistoryReader(Protocol):
    """The accounting view, for what a job's wait is compared with."""

    def requested_gpu_types(self, job_id: JobId) -> tuple[str, ...]: ...

    def time_limits(self, partition: str, since: datetime) -> dict[float, int]: ...
