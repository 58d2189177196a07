"""What the report needs of each source: a job id in, model records out.

The report builder and the service see only these protocols, so a test (or another
store) can stand in for any source without knowing how the real one queries. What only
some sources can do is an optional protocol of its own, checked with ``isinstance``
(``NodeEventReader``, ``CoverageReader``, ...): each says what a report lacks without it,
and ``tests/test_source_protocols.py`` says which real source offers which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from webapp.model import (
    AccountingJob,
    Coverage,
    JobId,
    NodeEvent,
    QueueContext,
    SacctJob,
    TimeLimitKind,
    Usage,
)
from webapp.sources.ended import EndedJob

J_co = TypeVar("J_co", covariant=True)  # a listed job: AccountingJob or SacctJob


@runtime_checkable
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


@runtime_checkable
class BulkAccountingReader(Protocol):
    """Optional of an accounting source: many jobs' records in one query, each by the
    sync's key (``submitted``: id -> submit time); without it the sync reads each job
    alone."""

    def jobs(self, job_ids: Iterable[str], *,
             submitted: Mapping[str, int] | None = None) -> dict[str, AccountingJob]: ...


@runtime_checkable
class SacctReader(Protocol):
    """The ``sacct`` command: steps, TotalCPU and MaxRSS."""

    def job(self, job_id: JobId) -> SacctJob: ...

    def array(self, job_id: JobId) -> tuple[SacctJob, ...]: ...


@runtime_checkable
class JobFiguresReader(Protocol):
    """Optional of a sacct source: ``job`` without AllocTRES, for a report whose GPUs,
    memory and billing come from the accounting view; without it the report reads
    ``job`` (a second slurmdbd request for what the view gave)."""

    def job_figures(self, job_id: JobId) -> SacctJob: ...


@runtime_checkable
class AdminCommentReader(Protocol):
    """Optional of a sacct source: a job's AdminComment, where jobstats (or our sync) keeps
    its usage summary; without it a job Prometheus and the archive no longer hold has no
    usage in its report."""

    def admin_comment(self, job_id: JobId | str) -> str | None: ...


@runtime_checkable
class BulkSacctReader(Protocol):
    """Optional of a sacct source: many jobs in one call (the sync's batches); without it
    the sync reads each job alone."""

    def jobs(self, job_ids: Iterable[str]) -> dict[str, SacctJob]: ...


@runtime_checkable
class MetricsReader(Protocol):
    """A Prometheus-compatible query API holding the exporter's jobs_* series."""

    def usage(self, job_id: JobId | tuple[str, ...], start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        """The job's series; a tuple: a het job's component ids, asked together."""


@runtime_checkable
class CoverageReader(Protocol):
    """Optional of a metrics source: how much of the run its samples cover, per node and
    per GPU; without it the report has no coverage section and withholds no verdict for
    too few samples."""

    def coverage(self, job_id: JobId | tuple[str, ...], start: datetime, end: datetime,
                 nodes: Iterable[str] = ()) -> Coverage: ...


@runtime_checkable
class RecentJobsReader(Protocol[J_co]):
    """Optional of an accounting or a sacct source: one user's or one account's jobs since
    ``since``, newest first, in one query (``RecentJobsReader[AccountingJob]`` of the view,
    ``[SacctJob]`` of sacct): what a job list reads; without it the service lists nothing
    (a user's own list on a login node reads ``sacct_accounting.SacctJobList`` instead)."""

    def recent(self, since: datetime, user: str | None = None, account: str | None = None
               ) -> Sequence[J_co]: ...


@runtime_checkable
class VectorReader(Protocol):
    """Optional of a metrics source: any instant query's (labels, value) pairs; without it
    a site's carbon intensity series is not read (the carbon figure is unknown)."""

    def vector(self, query: str, time: float | None = None
               ) -> list[tuple[dict[str, str], float]]: ...


@runtime_checkable
class ClusterScoped(Protocol):
    """Optional of a metrics source: the matcher that keeps a query to one cluster's series
    where one Prometheus holds several (``""`` where it holds one); without it a job
    list's GPU query is not scoped."""

    cluster_matcher: str


@runtime_checkable
class PartitionReader(Protocol):
    """The partitions' own limits: what a job's ``Partition_Limit`` stands for."""

    def max_time(self, partition: str) -> tuple[TimeLimitKind, float | None]: ...


@runtime_checkable
class BillingWeightsReader(Protocol):
    """Optional of a partitions source: a partition's TRESBillingWeights; without them the
    report's waste is in each resource's own unit only, not in billing units."""

    def billing_weights(self, partition: str) -> dict[str, float]: ...


@runtime_checkable
class ClusterReader(Protocol):
    """slurm-exporter's cluster series: a job's wait in the queue."""

    def queue(self, job_id: str, partition: str | None, submit: datetime,
              start: datetime | None) -> QueueContext: ...


@runtime_checkable
class QueueHistoryReader(Protocol):
    """The accounting view, for what a job's wait is compared with."""

    def requested_gpu_types(self, job_id: JobId) -> tuple[str, ...]: ...

    def time_limits(self, partition: str, since: datetime) -> dict[float, int]: ...
