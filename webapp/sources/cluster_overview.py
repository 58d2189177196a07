"""The cluster page's data: slurm-exporter's series, now, for one cluster.

Nodes with their state uncollapsed (base + flags) and reason, GPUs free per type, the
queue by partition and reason, who holds what, fair share, the exporter's health, and
GPUs allocated per account over the last days. Labels come back as Slurm wrote them
(untrusted: the page escapes them); the cluster name enters PromQL via promql_string.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from webapp.model import Series
from webapp.sources.prometheus import PrometheusSource, choose_step, grid_ending, promql_string

STALE_SECONDS = 120.0  # a snapshot older than this is shown as stale
USAGE_DAYS = 7


@dataclass(frozen=True)
class NodeRow:
    node: str
    state: str  # base+flags, as Slurm holds it: "mixed+drain"
    reason: str
    partitions: str
    cpus_alloc: int | None
    cpus_total: int | None
    gpus: str  # "a100 2/4" per type: allocated/total


@dataclass(frozen=True)
class ClusterOverview:
    nodes: tuple[NodeRow, ...] = ()
    gpus: tuple[tuple[str, int, int, int], ...] = ()  # type, available, allocated, total
    queue: tuple[tuple[str, str, int], ...] = ()  # partition, reason, pending jobs
    users: tuple[tuple[str, float, float], ...] = ()  # user, CPUs, GPUs (running jobs), all
    accounts: tuple[tuple[str, float, float], ...] = ()
    fairshare: tuple[tuple[str, str, float], ...] = ()  # account, user, fair share 0..1
    health: tuple[tuple[str, bool, float | None], ...] = ()  # source, up, snapshot age
    usage: tuple[Series, ...] = ()  # GPUs allocated per account over the last days
    stale: tuple[str, ...] = field(default=())  # why the numbers may be out of date


def _state(labels: dict[str, str]) -> str:
    flags = labels.get("flags", "")
    return labels.get("state", "?") + (f"+{flags}" if flags else "")


class ClusterOverviewSource:
    """Reads the page's series; raises SourceUnavailable when Prometheus fails."""

    def __init__(self, prometheus: PrometheusSource, cluster: str) -> None:
        self.p = prometheus
        self.sel = f"cluster={promql_string(cluster)}"

    def _v(self, template: str) -> list[tuple[dict[str, str], float]]:
        return self.p.vector(template.replace("{sel}", self.sel))

    def overview(self, now: float) -> ClusterOverview:
        return ClusterOverview(
            nodes=self._nodes(), gpus=self._gpus(), queue=self._queue(),
            users=self._holders("user"), accounts=self._holders("account"),
            fairshare=tuple(sorted(
                (m.get("account", ""), m.get("user", ""), v)
                for m, v in self._v("slurm_fairshare{{sel}}"))),
            health=(health := self._health()), usage=self._usage(now),
            stale=_stale(health),
        )

    def _nodes(self) -> tuple[NodeRow, ...]:
        def per_node(metric: str) -> dict[str, float]:
            return {m.get("node", ""): v
                    for m, v in self._v(f"sum by (node) ({metric}{{{{sel}}}})")}

        alloc, total = per_node("slurm_node_cpus_alloc"), per_node("slurm_node_cpus")
        parts: dict[str, list[str]] = defaultdict(list)
        for m, _ in self._v("slurm_node_partition_info{{sel}}"):
            parts[m.get("node", "")].append(m.get("partition", ""))
        gpus: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        for i, metric in enumerate(("slurm_node_gpus_alloc", "slurm_node_gpus")):
            for m, v in self._v(f"sum by (node, gpu_type) ({metric}{{{{sel}}}})"):
                gpus[m.get("node", "")][m.get("gpu_type", "")][i] = v
        rows = []
        for m, _ in self._v("slurm_node_state_info{{sel}}"):
            node = m.get("node", "")
            rows.append(NodeRow(
                node=node, state=_state(m), reason=m.get("reason", ""),
                partitions=", ".join(sorted(parts.get(node, []))),
                cpus_alloc=_int(alloc.get(node)), cpus_total=_int(total.get(node)),
                gpus=", ".join(f"{t} {a:.0f}/{n:.0f}" for t, (a, n) in sorted(gpus[node].items())),
            ))
        return tuple(sorted(rows, key=lambda r: r.node))

    def _gpus(self) -> tuple[tuple[str, int, int, int], ...]:
        def by_type(q: str) -> dict[str, float]:
            return {m.get("gpu_type", ""): v for m, v in self._v(q)}

        avail = by_type("sum by (gpu_type) (slurm_gpus_available{{sel}})")
        alloc = by_type("sum by (gpu_type) (slurm_gpus_alloc{{sel}})")
        total = by_type("sum by (gpu_type) (slurm_gpus{{sel}})")
        return tuple((t, int(avail.get(t, 0)), int(alloc.get(t, 0)), int(total[t]))
                     for t in sorted(total))

    def _queue(self) -> tuple[tuple[str, str, int], ...]:
        rows = self._v("sum by (partition, reason) (slurm_pending_jobs{{sel}})")
        return tuple(sorted(((m.get("partition", ""), m.get("reason", ""), int(v))
                             for m, v in rows if v > 0), key=lambda r: (r[0], -r[2], r[1])))

    def _holders(self, who: str) -> tuple[tuple[str, float, float], ...]:
        def held(what: str) -> dict[str, float]:
            q = f'sum by ({who}) (slurm_{who}_{what}_alloc{{{{sel}},state="RUNNING"}})'
            return {m.get(who, ""): v for m, v in self._v(q)}

        cpus, gpus = held("cpus"), held("gpus")
        rows = [(name, cpus.get(name, 0.0), gpus.get(name, 0.0)) for name in set(cpus) | set(gpus)]
        rows = [r for r in rows if r[1] or r[2]]
        # Every holder: the page cuts the list (webapp.web.cluster_view), after totals.
        return tuple(sorted(rows, key=lambda r: (-r[2], -r[1], r[0])))

    def _health(self) -> tuple[tuple[str, bool, float | None], ...]:
        age = {m.get("source", ""): v
               for m, v in self._v("max by (source) (slurm_scrape_snapshot_age_seconds{{sel}})")}
        return tuple(sorted((m.get("source", ""), v > 0, age.get(m.get("source", "")))
                            for m, v in self._v("min by (source) (slurm_up{{sel}})")))

    def _usage(self, now: float) -> tuple[Series, ...]:
        """GPUs allocated per account over the last USAGE_DAYS, the last point at ``now``."""
        q = f'sum by (account) (slurm_account_gpus_alloc{{{self.sel},state="RUNNING"}})'
        window = USAGE_DAYS * 86400
        step = choose_step(window, self.p.scrape_interval)
        return tuple(self.p.range(q, grid_ending(now, window, step), now, "account", step))


def _stale(health: tuple[tuple[str, bool, float | None], ...]) -> tuple[str, ...]:
    if not health:
        return ("Prometheus holds no slurm-exporter series for this cluster right now: "
                "the exporter is down or not scraped.",)
    out = [f"{source} is failing (slurm_up = 0): its numbers are the last good snapshot "
           "or missing." for source, up, _ in health if not up]
    out += [f"{source} snapshot is {age:.0f} s old." for source, up, age in health
            if up and age is not None and age > STALE_SECONDS]
    return tuple(out)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
