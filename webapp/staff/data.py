"""The staff report's input: every job that ended in a window, in bulk.

One ``sacct`` call for the window (allocations and steps: TotalCPU, MaxRSS) and one
PromQL query per metric for all jobs at once (``... by (jobid) (*_over_time(...[window]))``
evaluated at the window's end), never a query per job; the GPUs' from the source
JOBREPORT_GPU_METRICS chose (``gpu_job_queries``: a GPU exporter's by subquery, none
under ``tres``). Jobs are joined to the exporter's series by their raw id (an array
task's own id) and to slurm-exporter's pending reasons by the id squeue shows
(``123_4``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from webapp.model import NodeMemory, SacctJob
from webapp.report.precedence import sacct_memory_nodes
from webapp.sources.ended import FINAL_STATES
from webapp.sources.gpu_job_queries import (
    any_job,
    card_memory_per_job,
    duration,
    mean_per_job,
    memory_peak_per_job,
)
from webapp.sources.gpu_metrics import JOBS, GpuMetrics
from webapp.sources.prometheus import PrometheusSource, braced, promql_string
from webapp.sources.sacct import parse_sacct, run_sacct
from webapp.sources.sacct_records import delimiter_argv, new_delimiter, split_records
from webapp.sources.sacct_values import parse_nodelist

# SacctSource's FIELDS without the free text (a job name or directory may hold a newline,
# which would cost the job its line), plus Submit for the wait.
# What the staff tables need, fixed here (not derived from the report's FIELDS, which grow
# with the single-job report): the captured windows in fixtures/ hold exactly these.
STAFF_FIELDS = ("JobID", "JobIDRaw", "User", "Account", "Partition", "State", "ExitCode",
                "Elapsed", "Timelimit", "TotalCPU", "AllocCPUS", "NNodes", "NTasks", "ReqMem",
                "MaxRSS", "AllocTRES", "Start", "End", "NodeList", "Submit")
# {scope}: nothing, or the cluster's matcher in braces where one Prometheus holds several
# clusters' series (``prometheus.braced``). The GPU figures (mean utilisation, memory peak,
# the card's memory) come from the source JOBREPORT_GPU_METRICS chose: ``gpu_queries``.
JOB_QUERIES = {
    # counters from the job's start, per node and source: each series' last, summed
    "energy_joules": "sum by (jobid) (max_over_time(jobs_energy_joules_total{scope}[{w}]))",
}
# Per node: the job's CPU seconds there (counters start at zero with the job's cgroup).
NODE_CPU_QUERY = "sum by (jobid, {node}) (max_over_time(jobs_cpu_seconds_total{scope}[{w}]))"
REASONS_QUERY = "sum by (jobid, reason) (count_over_time(slurm_job_pending_info{{{c}}}[{w}]))"


@dataclass(frozen=True)
class StaffJob:
    """One ended job, reduced to what the staff report ranks (seconds, bytes, Unix time)."""

    job_id: str
    raw_id: str
    user: str
    account: str
    partition: str
    state: str
    submit: float | None
    start: float | None
    end: float | None
    elapsed: float
    time_limit: float | None
    cpus: int
    nodes: tuple[str, ...]
    memory_requested: int | None
    gpus: int
    cpu_seconds: float | None
    max_rss: int | None  # the largest single task's MaxRSS
    gpu_utilization: float | None = None  # mean over the job and its GPUs, 0..1
    gpu_memory_used: float | None = None  # peak on any GPU
    gpu_memory_total: float | None = None
    node_cpu_seconds: dict[str, float] = field(default_factory=dict)
    pending_reasons: tuple[tuple[str, float], ...] = ()  # (reason, seconds seen)
    energy_joules: float | None = None  # what the exporter split to the job; None: no series
    # Each node's own request and peak, as the report judges them (``NodeMemory``): what
    # its memory used and its efficiency are of; () where not known (an archived row).
    memory_nodes: tuple[NodeMemory, ...] = ()
    # The parsed record, steps included: the report's peak is computed from it.
    sacct: SacctJob | None = field(default=None, repr=False, compare=False)

    @property
    def wait(self) -> float | None:
        return self.start - self.submit if self.start and self.submit else None


def _local(ts: int) -> str:
    """sacct reads -S/-E in the local zone (it prints Unix seconds, but does not parse them)."""
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%dT%H:%M:%S")  # noqa: DTZ006


def sacct_argv(sacct: str, cluster: str, since: int, until: int, delimiter: str) -> list[str]:
    """With end states, -S/-E select the jobs in those states within the window: every
    job that ended in it, and some that ended later (``parse_window`` drops those)."""
    return [sacct, *delimiter_argv(delimiter), "--allusers", "--clusters", cluster,
            "--format", ",".join(STAFF_FIELDS), "--starttime", _local(since),
            "--endtime", _local(until + 1), "--state", ",".join(FINAL_STATES)]


def _raw_and_submit(text: str, delimiter: str) -> dict[str, tuple[str, float | None]]:
    """JobID -> (JobIDRaw, Submit) from allocation lines (steps have a '.')."""
    i_id, i_raw = STAFF_FIELDS.index("JobID"), STAFF_FIELDS.index("JobIDRaw")
    out = {}
    for p in split_records(text, len(STAFF_FIELDS), delimiter):
        if "." in p[i_id]:
            continue
        out[p[i_id]] = (p[i_raw], float(p[-1]) if p[-1].isdigit() else None)
    return out


def parse_window(text: str, since: float, until: float,
                 delimiter: str = "|") -> list[StaffJob]:
    """``sacct_argv``'s output (times as Unix seconds) -> the jobs that ended in
    [since, until], in sacct's order."""
    ids = _raw_and_submit(text, delimiter)
    out = []
    for j in parse_sacct(text, STAFF_FIELDS, delimiter=delimiter):
        if j.job_id not in ids or not j.start_time or not j.end_time:
            continue
        if not since <= j.end_time.timestamp() <= until:
            continue
        out.append(staff_job(j, *ids[j.job_id]))
    return out


def staff_job(j: SacctJob, raw_id: str, submit: float | None) -> StaffJob:
    """One ended job's sacct record (with its steps) as the staff tables read it."""
    try:
        nodes = parse_nodelist(j.node_list) if j.node_list else ()
    except ValueError:
        nodes = ()
    return StaffJob(
        j.job_id, raw_id, j.user or "", j.account or "", j.partition or "", j.state, submit,
        j.start_time.timestamp() if j.start_time else None,
        j.end_time.timestamp() if j.end_time else None, j.elapsed_seconds or 0.0,
        j.time_limit_seconds, j.cpus or 0, tuple(nodes), j.memory_requested_bytes, j.gpus,
        j.total_cpu_seconds, j.max_rss_bytes,
        memory_nodes=sacct_memory_nodes(j, j.memory_requested_bytes), sacct=j)


def gpu_queries(p: PrometheusSource, w: str, node: str) -> dict[str, str]:
    """Every job's GPU figures over the window ``w``, from ``p``'s GPU source (jobs-exporter's
    as always; a GPU exporter's every series with its job label set, ``any_job``)."""
    gm: GpuMetrics = getattr(p, "gpu_metrics", JOBS)  # a stand-in without one: the default
    sel, step = any_job(gm, p.cluster_matcher), duration(p.scrape_interval)
    return {"gpu_utilization": mean_per_job(gm, sel, node, w, step),
            "gpu_memory_used": memory_peak_per_job(gm, sel, node, w, step),
            "gpu_memory_total": card_memory_per_job(gm, sel, node, w)}


class StaffDataSource:
    """sacct + Prometheus for a window; ``runner`` runs sacct (injectable)."""

    def __init__(self, sacct: str, cluster: str, prometheus: PrometheusSource,
                 runner: Callable[[list[str]], str] | None = None, timeout: float = 120.0) -> None:
        self.sacct, self.cluster, self.p = sacct, cluster, prometheus
        self.runner = runner or (lambda argv: run_sacct(argv, timeout))

    def jobs(self, since: float, until: float) -> list[StaffJob]:
        """Raises SourceUnavailable when sacct or Prometheus fails."""
        d = new_delimiter()
        text = self.runner(sacct_argv(self.sacct, self.cluster, int(since), int(until), d))
        jobs = parse_window(text, since, until, d)
        w = f"{max(1, int(until - since))}s"
        scope = braced(self.p.cluster_matcher)
        node = self.p.node_label or "instance"
        queries = {**gpu_queries(self.p, w, node),
                   **{name: q.format(w=w, scope=scope) for name, q in JOB_QUERIES.items()}}
        per_job = {name: {labels.get("jobid", ""): v for labels, v in self.p.vector(q, until)}
                   for name, q in queries.items()}
        node_cpu: dict[str, dict[str, float]] = defaultdict(dict)
        for labels, v in self.p.vector(NODE_CPU_QUERY.format(w=w, node=node, scope=scope),
                                       until):
            node_cpu[labels.get("jobid", "")][labels.get(node, "")] = v
        reasons: dict[str, list[tuple[str, float]]] = defaultdict(list)
        c = f"cluster={promql_string(self.cluster)}"
        for labels, v in self.p.vector(REASONS_QUERY.format(w=w, c=c), until):
            reasons[labels.get("jobid", "")].append(
                (labels.get("reason", "?"), v * self.p.scrape_interval))
        out = []
        for j in jobs:
            out.append(StaffJob(**{
                **j.__dict__,
                "gpu_utilization": per_job["gpu_utilization"].get(j.raw_id),
                "gpu_memory_used": per_job["gpu_memory_used"].get(j.raw_id),
                "gpu_memory_total": per_job["gpu_memory_total"].get(j.raw_id),
                "node_cpu_seconds": dict(node_cpu.get(j.raw_id, {})),
                "energy_joules": per_job["energy_joules"].get(j.raw_id),
                "pending_reasons": tuple(sorted(reasons.get(j.job_id, []),
                                                key=lambda r: -r[1])),
            }))
        return out
