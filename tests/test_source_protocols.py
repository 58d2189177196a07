"""Which source offers which capability: every protocol of webapp/sources/protocols.py
checked against every real source and every stand-in the code builds, both ways. A source
that loses a capability (a renamed method) or a stand-in that never had one is a line of
this table, not a report that silently lacks its coverage, billing weights, carbon or
AdminComment fallback."""

from __future__ import annotations

import inspect
from typing import Protocol

import pytest

from webapp.sources import protocols
from webapp.sources.accounting import AccountingSource
from webapp.sources.cluster import ClusterSource
from webapp.sources.cluster_bulk import PrefetchedCluster
from webapp.sources.no_metrics import NoMetrics
from webapp.sources.partitions import PartitionSource
from webapp.sources.prefetched import PrefetchedAccounting, PrefetchedSacct
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.prometheus_bulk import PrefetchedMetrics
from webapp.sources.protocols import (
    AccountingReader,
    AdminCommentReader,
    BillingWeightsReader,
    BulkAccountingReader,
    BulkSacctReader,
    ClusterReader,
    ClusterScoped,
    CoverageReader,
    JobFiguresReader,
    MetricsReader,
    NodeEventReader,
    PartitionReader,
    QueueHistoryReader,
    RecentJobsReader,
    SacctReader,
    VectorReader,
)
from webapp.sources.sacct import SacctSource
from webapp.sources.sacct_accounting import NoAccounting, SacctAccounting
from webapp.sources.slurmrestd import SlurmrestdSource

PROMETHEUS = "http://127.0.0.1:9"  # never asked: making a source queries nothing


def _prometheus() -> PrometheusSource:
    return PrometheusSource(PROMETHEUS, cluster_label="cluster", cluster="demo")


# The report service's sources by role: the required protocol first, then the optional.
ROLES = {
    "accounting": (AccountingReader, NodeEventReader, QueueHistoryReader,
                   BulkAccountingReader, RecentJobsReader),
    "sacct": (SacctReader, JobFiguresReader, AdminCommentReader, BulkSacctReader,
              RecentJobsReader),
    "metrics": (MetricsReader, CoverageReader, VectorReader, ClusterScoped),
    "partitions": (PartitionReader, BillingWeightsReader),
    "cluster": (ClusterReader,),
}
# Each source (made as the service makes it; nothing is read until a method is called),
# its role and every protocol of that role it satisfies; the role's others it must not.
OFFERS = {
    "AccountingSource": (
        lambda: AccountingSource("mysql://jobreport@127.0.0.1/slurm_acct_db", "demo"),
        "accounting",
        {AccountingReader, NodeEventReader, QueueHistoryReader, BulkAccountingReader,
         RecentJobsReader}),
    # `jobreport` run by a user on a login node: sacct as the caller, no database.
    "SacctAccounting": (lambda: SacctAccounting(SacctSource(), "demo"), "accounting",
                        {AccountingReader}),
    "NoAccounting": (NoAccounting, "accounting", {AccountingReader}),
    "SacctSource": (
        SacctSource, "sacct",
        {SacctReader, JobFiguresReader, AdminCommentReader, BulkSacctReader,
         RecentJobsReader}),
    # AllocTRES comes with every job it answers: no cheaper figures-only call to offer.
    "SlurmrestdSource": (
        lambda: SlurmrestdSource("http://127.0.0.1:6820"), "sacct",
        {SacctReader, AdminCommentReader, BulkSacctReader, RecentJobsReader}),
    "PrometheusSource": (
        _prometheus, "metrics", {MetricsReader, CoverageReader, VectorReader, ClusterScoped}),
    # A cluster served without a Prometheus: every answer is a gap, so nothing to cover.
    "NoMetrics": (lambda: NoMetrics("demo"), "metrics",
                  {MetricsReader, VectorReader, ClusterScoped}),
    "PartitionSource": (PartitionSource, "partitions", {PartitionReader, BillingWeightsReader}),
    "ClusterSource": (lambda: ClusterSource(_prometheus(), "demo"), "cluster",
                      {ClusterReader}),
    # The sync's bulk readers (webapp/sync/bulk.py) offer the required protocols only:
    # the reports the sync builds (archived, mailed) have no node events, no coverage
    # section (nor the verdicts it withholds), no carbon from an intensity series and no
    # AdminComment fallback, though the live sources they wrap have them.
    "PrefetchedAccounting": (lambda: PrefetchedAccounting(None, {}), "accounting",
                             {AccountingReader, QueueHistoryReader, NodeEventReader}),
    "PrefetchedSacct": (lambda: PrefetchedSacct(None, {}), "sacct", {SacctReader}),
    "PrefetchedMetrics": (lambda: PrefetchedMetrics(None, {}), "metrics",
                          {MetricsReader, CoverageReader, VectorReader}),
    "PrefetchedCluster": (lambda: PrefetchedCluster(None, {}), "cluster", {ClusterReader}),
}

ALL = {member for _, member in inspect.getmembers(protocols, inspect.isclass)
       if member.__module__ == protocols.__name__ and Protocol in member.__mro__}


def test_every_protocol_is_runtime_checkable_has_a_role_and_a_source():
    assert ALL, "webapp/sources/protocols.py declares the protocols"
    for proto in ALL:
        assert getattr(proto, "_is_runtime_protocol", False), f"{proto.__name__}: isinstance"
    assert set().union(*ROLES.values()) == ALL, "give the new protocol its role in ROLES"
    offered = set().union(*(protos for _, _, protos in OFFERS.values()))
    assert offered == ALL, f"no source offers {sorted(p.__name__ for p in ALL - offered)}"


@pytest.mark.parametrize("name", OFFERS)
def test_each_source_offers_exactly_its_capabilities(name):
    make, role, offers = OFFERS[name]
    source = make()
    assert offers <= set(ROLES[role])
    has = {p.__name__ for p in ROLES[role] if isinstance(source, p)}
    assert has == {p.__name__ for p in offers}


def test_a_stand_in_without_a_capability_is_told_by_isinstance():
    class Minimal:
        """A test's metrics reader: the series, nothing else."""

        def usage(self, job_id, start, end, nodes=(), resolution="plot"):
            raise NotImplementedError

    assert isinstance(Minimal(), MetricsReader)
    assert not isinstance(Minimal(), CoverageReader | VectorReader | ClusterScoped)
