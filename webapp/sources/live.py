"""A running job's recent behaviour: the exporter's series over trailing windows, now.

What ``jobreport watch`` judges. Each quantity is read over its own window (the rule's):
a few instant queries per job (``*_over_time`` and ``increase``), plus one short range
query of memory per node for the growth fit. The GPUs' from the source
JOBREPORT_GPU_METRICS chose (``gpu_job_queries``; none under ``tres``). The job id (and
the cluster, where one Prometheus holds several) enters PromQL only through
``job_selector`` (``promql_string``).
"""

from __future__ import annotations

from dataclasses import dataclass

from webapp.model import AccountingJob, Series, held_memory
from webapp.sources.gpu_job_queries import duration, mean_per_gpu, samples_per_gpu
from webapp.sources.gpu_metrics import JOBS, GpuMetrics
from webapp.sources.prometheus import PrometheusSource


@dataclass(frozen=True)
class Windows:
    """Seconds looked back for each quantity (the watch rules' windows)."""

    gpu: float
    node: float
    memory: float
    output: float
    small_files: float


@dataclass(frozen=True)
class Measured:
    """One value per GPU or node over a window, and how many samples it rests on."""

    label: str
    value: float
    samples: int


@dataclass(frozen=True)
class LiveSample:
    """What Prometheus holds about one running job at ``now`` (Unix seconds).

    ``None`` means "no data", never zero: a rule never fires on missing series."""

    job: AccountingJob
    now: float
    windows: Windows
    scrape_interval: float
    gpu_utilization: tuple[Measured, ...] = ()  # mean 0..1 per GPU over windows.gpu
    node_cores: tuple[Measured, ...] = ()  # mean cores busy per node over windows.node
    # bytes held per node over windows.memory: anonymous + shared (model.held_memory)
    memory_held: tuple[Series, ...] = ()
    memory_limit_bytes: float | None = None  # per node (the cgroup's limit)
    written_bytes: float | None = None  # increase over windows.output
    small_files_write_bytes: float | None = None  # increase over windows.small_files
    small_files_write_calls: float | None = None
    scratch_in_use: float | None = None  # max 0/1 over windows.small_files


def _measured(rows: list[tuple[dict[str, str], float]], counts: dict[str, int],
              label: str) -> tuple[Measured, ...]:
    out = []
    for labels, value in rows:
        key = "/".join(labels.get(k, "") for k in label.split("/"))
        out.append(Measured(key, value, counts.get(key, 0)))
    return tuple(sorted(out, key=lambda m: m.label))


def _counts(rows: list[tuple[dict[str, str], float]], label: str) -> dict[str, int]:
    return {"/".join(labels.get(k, "") for k in label.split("/")): int(v) for labels, v in rows}


def _scalar(rows: list[tuple[dict[str, str], float]]) -> float | None:
    return rows[0][1] if rows else None


class LiveSource:
    """Reads ``LiveSample``s from a Prometheus-compatible API."""

    def __init__(self, prometheus: PrometheusSource) -> None:
        self.p = prometheus
        self.node = prometheus.node_label or "instance"

    def _w(self, seconds: float) -> str:
        return f"{max(int(seconds), int(2 * self.p.scrape_interval))}s"

    def sample(self, job: AccountingJob, now: float, windows: Windows) -> LiveSample:
        """Raises SourceUnavailable when Prometheus fails."""
        sel = self.p.selector(job.job_id)
        node, v = self.node, self.p.vector
        gpu_label = f"{node}/gpu"
        g, n = self._w(windows.gpu), self._w(windows.node)
        # the GPUs from the source JOBREPORT_GPU_METRICS chose (gpu_job_queries)
        gm: GpuMetrics = getattr(self.p, "gpu_metrics", JOBS)
        gsel = self.p.selector(job.job_id, job_label=gm.job_label)
        step = duration(self.p.scrape_interval)
        gpu_rows = v(mean_per_gpu(gm, gsel, node, g, step), now)
        gpu_counts = v(samples_per_gpu(gm, gsel, node, g, step), now)
        # Cores busy = CPU seconds gained over the window / the window (both modes summed).
        core_rows = v(f"sum by ({node}) (increase(jobs_cpu_seconds_total{{{sel}}}[{n}]))"
                      f" / {max(int(windows.node), 1)}", now)
        core_counts = v(f"max by ({node}) (count_over_time(jobs_cpus{{{sel}}}[{n}]))", now)
        m, o, s = self._w(windows.memory), self._w(windows.output), self._w(windows.small_files)
        anon, shmem = (self.p.range(f"max by ({node}) (jobs_memory_{kind}_bytes{{{sel}}})",
                                    now - windows.memory, now, node)
                       for kind in ("rss", "shmem"))
        return LiveSample(
            job=job, now=now, windows=windows, scrape_interval=self.p.scrape_interval,
            gpu_utilization=_measured(gpu_rows, _counts(gpu_counts, gpu_label), gpu_label),
            node_cores=_measured(core_rows, _counts(core_counts, node), node),
            memory_held=held_memory(tuple(anon), tuple(shmem)),
            memory_limit_bytes=_scalar(v(f"max(max_over_time(jobs_memory_limit_bytes{{{sel}}}"
                                         f"[{m}]))", now)),
            written_bytes=_scalar(v(f"sum(increase(jobs_write_bytes_total{{{sel}}}[{o}]))", now)),
            small_files_write_bytes=_scalar(
                v(f"sum(increase(jobs_write_bytes_total{{{sel}}}[{s}]))", now)),
            small_files_write_calls=_scalar(
                v(f"sum(increase(jobs_write_syscalls_total{{{sel}}}[{s}]))", now)),
            scratch_in_use=_scalar(
                v(f"max(max_over_time(jobs_scratch_in_use{{{sel}}}[{s}]))", now)),
        )
