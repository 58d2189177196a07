"""The report model: immutable records every source, detector and renderer shares.

Units are bytes and seconds (floats) until a template formats them; datetimes are
UTC-aware. ``None`` always means "unknown", never zero.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from jobreport_common.redact import redact
from webapp import states

# 123, array task 123_4, het component 123+1. Anything else is refused before any query.
JOB_ID_RE = re.compile(r"^(?P<job>[0-9]{1,10})(?:_(?P<task>[0-9]{1,10})|\+(?P<het>[0-9]{1,4}))?\Z")


def cpu_efficiency(cpu_seconds: float | None, elapsed_seconds: float | None,
                   cpus: int | None) -> float | None:
    """seff's formula: TotalCPU / (elapsed x allocated CPUs); None when a part is unknown."""
    if not cpu_seconds or not elapsed_seconds or not cpus:
        return 0.0 if cpu_seconds == 0 and elapsed_seconds else None
    return cpu_seconds / (elapsed_seconds * cpus)


def gpu_utilization(series: Iterable[Series]) -> float | None:
    """Each GPU's mean utilisation, averaged over the GPUs with samples; None without."""
    means = [m for s in series if (m := s.mean()) is not None]
    return sum(means) / len(means) if means else None


class InvalidJobId(ValueError):
    """The text is not a Slurm job id of a form we accept."""


class JobNotFound(LookupError):
    """No source knows this job."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class SourceUnavailable(RuntimeError):
    """A data source could not be reached or answered nonsense.

    ``reason`` is a plain sentence any user may read; ``detail`` (driver errors, hosts,
    ports) is for logs and staff only.
    """

    def __init__(self, source: str, reason: str, detail: str | None = None) -> None:
        reason = redact(reason)  # driver and HTTP errors may quote URLs with credentials
        detail = redact(detail) if detail else detail
        super().__init__(f"{source} unavailable: {reason}")
        self.source = source
        self.reason = reason
        self.detail = detail


class TimeLimitKind(StrEnum):
    """Which time limit applied: Slurm prints a job's own, ``Partition_Limit`` or ``UNLIMITED``."""

    JOB = "job"
    PARTITION = "partition"  # the partition's MaxTime applies (resolved when we can)
    UNLIMITED = "unlimited"  # only when Slurm itself says UNLIMITED / INFINITE


@dataclass(frozen=True)
class JobId:
    """A parsed job id: the numeric job plus an optional array task or het offset."""

    job: int
    array_task: int | None = None
    het_offset: int | None = None

    @classmethod
    def parse(cls, text: str) -> JobId:
        m = JOB_ID_RE.match(str(text).strip())
        if not m:
            raise InvalidJobId(f"invalid job id {text!r}: expected 123, 123_4 or 123+1")
        task, het = m.group("task"), m.group("het")
        return cls(int(m.group("job")), int(task) if task else None, int(het) if het else None)

    @classmethod
    def of(cls, value: JobId | str) -> JobId:
        """``value`` itself when already parsed, else ``parse(value)``."""
        return value if isinstance(value, JobId) else cls.parse(value)

    def __str__(self) -> str:
        if self.array_task is not None:
            return f"{self.job}_{self.array_task}"
        if self.het_offset is not None:
            return f"{self.job}+{self.het_offset}"
        return str(self.job)


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """Sort key: the most severe first."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Finding:
    """One problem a detector saw, with the numbers behind it and what to do next time."""

    name: str
    severity: Severity
    message: str
    advice: str
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    # The evidence as one readable sentence ("1 GPU allocated, idle for the whole job"):
    # what HTML, text, PDF and email show; JSON keeps ``evidence`` as numbers as well.
    evidence_text: str | None = None


# The gap of a report rebuilt from the archive once Prometheus no longer holds the job's
# series: a lower resolution that no later request can improve, not a source down.
ARCHIVE_SOURCE = "archive"


@dataclass(frozen=True)
class NodeEvent:
    """A period one of the job's nodes was down, drained or failing (slurmdbd's node
    events), with the reason Slurm or an admin gave: trouble that is not the user's."""

    node: str
    start: datetime
    end: datetime | None  # None: still so
    state: str  # Slurm's words: "DOWN", "DRAIN", "DOWN+FAIL", "IDLE+DRAIN+REBOOT", ...
    reason: str


@dataclass(frozen=True)
class GpuDevice:
    """What one allocated GPU is (the exporter's ``jobs_gpu_info``): its vendor and model,
    a MIG device's profile, and the identity it keeps whatever index a tool shows."""

    gpu: str  # labelled as gpu_utilization's series: "<node>/<gpu>"
    vendor: str  # "nvidia", "amd"
    model: str
    profile: str = ""  # a MIG device's ("1g.10gb"); "" for a whole card
    uuid: str = ""
    pci_bus_id: str = ""
    # "1/7": a MIG device's or AMD partition's power and energy are that share of its
    # card's, an estimate (the card meters none of its own); "": its own readings
    power_share: str = ""


# What each replay stands in for (jobs-exporter's ``source`` label), in the report's words.
REPLAY_SOURCES = {"nvml": "NVIDIA", "amdsmi": "AMD", "powercap": "RAPL"}
GPU_REPLAYS = frozenset({"nvml", "amdsmi"})  # those whose readings are the GPUs'


@dataclass(frozen=True)
class Replay:
    """Readings a node's exporter played back from a recording instead of measuring them
    while the job ran (``jobs_exporter_replay_info``: test and demo stacks)."""

    node: str  # the node label's value, as in a GPU's "<node>/<gpu>"
    source: str  # what it stands in for: "nvml", "amdsmi", "powercap"
    recording: str = ""  # the recording's file name; "" when the exporter names none

    @property
    def described(self) -> str:
        """'gpu1 (NVIDIA, recording replay.json)'."""
        what = REPLAY_SOURCES.get(self.source, self.source)
        return f"{self.node} ({what}" + (f", recording {self.recording})"
                                         if self.recording else ")")


@dataclass(frozen=True)
class GpuFault:
    """Errors a GPU reported while the job held it: an XID (NVIDIA's driver error codes)
    or memory errors (ECC on NVIDIA, RAS on AMD), from the exporter's counters."""

    gpu: str  # labelled as gpu_utilization's series: "<node>/<gpu>"
    kind: str  # "xid", "ecc_uncorrected", "ecc_corrected"
    code: str | None  # the XID number; None for memory errors
    count: float  # errors over the job's run
    first_at: float | None = None  # unix seconds of the first sample that counted it


@dataclass(frozen=True)
class Gap:
    """A source that failed or had no data for this job: why, in plain words for anyone
    (``reason``), and the technical ``detail`` that only logs and staff see."""

    source: str
    reason: str
    detail: str | None = None


@dataclass(frozen=True)
class Series:
    """One time series: ``points`` are (unix seconds, value) pairs, sorted by time."""

    label: str
    points: tuple[tuple[float, float], ...]

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.points]

    def max(self) -> float | None:
        return max(self.values) if self.points else None

    def mean(self) -> float | None:
        return sum(self.values) / len(self.points) if self.points else None

    def fit(self) -> LinearFit | None:
        """Least-squares line through the points; None below two distinct times."""
        n = len(self.points)
        if n < 2:
            return None
        mx = sum(x for x, _ in self.points) / n
        my = sum(y for _, y in self.points) / n
        sxx = sum((x - mx) ** 2 for x, _ in self.points)
        if sxx == 0:
            return None
        slope = sum((x - mx) * (y - my) for x, y in self.points) / sxx
        syy = sum((y - my) ** 2 for _, y in self.points)
        residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in self.points)
        r2 = 1.0 - residual / syy if syy else 0.0
        return LinearFit(slope=slope, intercept=my - slope * mx, r2=r2, points=n)


@dataclass(frozen=True)
class LinearFit:
    """y = slope * t + intercept over unix seconds; ``r2`` is how much of the variation
    the line explains (1: every point on it, 0: no better than the mean)."""

    slope: float
    intercept: float
    r2: float
    points: int

    def at(self, t: float) -> float:
        return self.slope * t + self.intercept


@dataclass(frozen=True)
class Step:
    """One job step from sacct (``batch``, ``extern``, ``0``, ...)."""

    step_id: str
    name: str
    state: str
    exit_code: str
    elapsed_seconds: float | None
    total_cpu_seconds: float | None
    max_rss_bytes: int | None
    cpus: int | None
    nodes: tuple[str, ...] = ()
    tasks: int | None = None  # NTasks: MaxRSS is per task, so the step used up to MaxRSS x tasks
    max_rss_node: str | None = None  # MaxRSSNode: where the largest task ran
    # A het component's line only: its own job id (JobIDRaw: its cgroup's name), --mem
    # over its nodes in bytes, and its GPUs; what the whole job's figures add up.
    raw_id: str | None = None
    memory_requested_bytes: int | None = None
    gpus: int = 0
    # sacct's usage TRES of the step, as printed (None: not asked for, or empty): what
    # JOBREPORT_GPU_METRICS=tres reads its gres/gpuutil and gres/gpumem from
    # (webapp.report.gpu_from_tres). Average and total over the step's tasks, and the largest.
    tres_usage_in_ave: str | None = None
    tres_usage_in_tot: str | None = None
    tres_usage_in_max: str | None = None


@dataclass(frozen=True)
class AccountingJob:
    """What the accounting database (restricted view) knows about one job."""

    cluster: str
    job_id: str
    job: int
    array_job: int | None
    array_task: int | None
    het_job: int | None
    het_offset: int | None
    uid: int
    user: str | None
    account: str | None
    partition: str | None
    job_name: str | None
    state: str
    exit_code: str
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    cpus: int | None
    memory_requested_bytes: int | None
    time_limit_seconds: float | None
    nodes: tuple[str, ...]
    node_list: str
    work_dir: str | None
    gpus: int
    time_limit_kind: TimeLimitKind | None = None
    billing: float | None = None  # tres_alloc's billing TRES: billing units per hour
    qos: str | None = None  # the QoS it ran under, by name; None: none or a view without it


@dataclass(frozen=True)
class SacctJob:
    """One job (allocation + its steps) as sacct reports it."""

    job_id: str
    job_name: str | None
    user: str | None
    account: str | None
    partition: str | None
    state: str
    exit_code: str
    elapsed_seconds: float | None
    time_limit_seconds: float | None
    cpus: int | None
    memory_requested_bytes: int | None
    gpus: int
    start_time: datetime | None
    end_time: datetime | None
    node_list: str
    work_dir: str | None
    steps: tuple[Step, ...]
    cancelled_by: int | None = None  # uid from sacct's "CANCELLED by <uid>"
    raw_id: str | None = None  # JobIDRaw: an array task's own numeric id (its cgroup's name)
    time_limit_kind: TimeLimitKind | None = None
    # The allocation line's own TotalCPU and MaxRSS: all there is when sacct lists no steps
    # (old Slurm, or steps purged); with -X, TotalCPU reads 0 there.
    alloc_cpu_seconds: float | None = None
    alloc_max_rss_bytes: int | None = None
    # A het job's components (``123+0``, ``123+1``, ...), each reduced to one line.
    components: tuple[Step, ...] = ()
    billing: float | None = None  # AllocTRES billing=N: the job's billing units per hour
    qos: str | None = None  # QOS: the QoS it ran under (not asked when the view answers)

    @property
    def total_cpu_seconds(self) -> float | None:
        """TotalCPU summed over steps (the allocation line reads 0 with -X)."""
        values = [s.total_cpu_seconds for s in self.steps if s.total_cpu_seconds is not None]
        return sum(values) if values else None

    @property
    def max_rss_bytes(self) -> int | None:
        """The largest single task's MaxRSS over the steps (not the job's peak: see peak.py)."""
        values = [s.max_rss_bytes for s in self.steps if s.max_rss_bytes is not None]
        return max(values) if values else None


def held_memory(anon: tuple[Series, ...], shmem: tuple[Series, ...]) -> tuple[Series, ...]:
    """Per node, anonymous + shared memory at each sample of the anonymous series: what the
    job held that the kernel cannot reclaim (the page cache it can), the measure of
    ``webapp.report.peak``. A node without shared memory series (an older exporter, a
    kernel without the figure) holds its anonymous memory alone."""
    shared = {s.label: dict(s.points) for s in shmem}
    return tuple(Series(a.label, tuple((t, v + shared.get(a.label, {}).get(t, 0.0))
                                       for t, v in a.points)) for a in anon)


@dataclass(frozen=True)
class Usage:
    """What Prometheus recorded while the job ran (the exporter's jobs_* metrics)."""

    cpu_cores: tuple[Series, ...] = ()  # cores busy, one series per node
    # 0..1 busy over the whole job: one single-point series per node/core (v1 only)
    cpu_per_core: tuple[Series, ...] = ()
    memory_rss: tuple[Series, ...] = ()  # bytes, per node: anonymous memory
    # bytes per node: shared memory (tmpfs, /dev/shm files) and the page cache, which
    # includes it; none from an exporter (or a v1 kernel) without them
    memory_shmem: tuple[Series, ...] = ()
    memory_cache: tuple[Series, ...] = ()
    memory_limit_bytes: int | None = None
    memory_max_usage_bytes: int | None = None  # includes page cache
    gpu_utilization: tuple[Series, ...] = ()  # 0..1, one per GPU
    gpu_memory_used: tuple[Series, ...] = ()  # bytes, one per GPU
    gpu_memory_total_bytes: int | None = None
    read_bytes: float | None = None
    write_bytes: float | None = None
    read_syscalls: float | None = None
    write_syscalls: float | None = None
    io_read_rate: tuple[Series, ...] = ()  # bytes/s per node
    io_write_rate: tuple[Series, ...] = ()
    processes_max: float | None = None
    threads_max: float | None = None
    open_files_max: float | None = None
    open_files_limit_ratio_max: float | None = None
    scratch_in_use: bool | None = None
    step_seconds: float | None = None  # resolution of the series (the range queries' step)
    # cgroup v2 only (None on v1): seconds some task of the job waited for the CPU, for
    # storage and for memory (PSI "some" totals, on its busiest node), and how often it
    # went over memory.high (the kernel throttled it into reclaim).
    cpu_pressure_seconds: float | None = None
    io_pressure_seconds: float | None = None
    memory_pressure_seconds: float | None = None
    memory_high_events: float | None = None
    # cgroup v1 and v2, from each thread's scheduler times (None: an exporter without them):
    # task-seconds the job's threads waited for a CPU and (with kernel delay accounting)
    # for block I/O, summed over nodes; and the most threads busy at once on a node
    # (on a CPU or waiting for one for half a scrape interval or more).
    cpu_wait_seconds: float | None = None
    io_wait_seconds: float | None = None
    busy_tasks_max: float | None = None
    # Joules the exporter attributed to the job (jobs_energy_joules_total), all sources,
    # and its gpu and other (the node meter's rest, by cores) parts; None: no energy series.
    energy_joules: float | None = None
    energy_gpu_joules: float | None = None
    energy_other_joules: float | None = None
    energy_by_node: tuple[tuple[str, float], ...] = ()  # (node, joules)
    # (node, bytes): each node's job cgroup memory limit at the end (jobs_memory_limit_bytes),
    # what Slurm gave that node: the nodes' shares of a --mem-per-cpu request
    memory_limit_by_node: tuple[tuple[str, float], ...] = ()
    gpu_energy: tuple[tuple[str, float], ...] = ()  # (label as gpu_utilization's, joules)
    gpu_faults: tuple[GpuFault, ...] = ()  # errors the job's GPUs reported during its run
    gpu_devices: tuple[GpuDevice, ...] = ()  # what each allocated GPU is (jobs_gpu_info)
    # Nodes whose exporter-summed counters (energy, exited I/O, waits) went back to 0 during
    # the run, their figures with the counts before added back (sources/counter_resets.py)
    counter_resets: tuple[str, ...] = ()
    # Readings the job's nodes played back from recordings, not measured (test and demo
    # stacks): every figure resting on them says so
    replayed: tuple[Replay, ...] = ()
    # None: the GPU figures are Prometheus series. Else the source they come from instead
    # (Slurm's TRES, webapp.report.gpu_from_tres): one figure per GPU at the job's end, no series.
    gpu_figures_from: str | None = None
    queries: tuple[tuple[str, str], ...] = ()  # (name, PromQL) as sent, for the audit

    @property
    def replay_note(self) -> str | None:
        """The audit's note where readings were replayed ('Readings replayed, not measured:
        gpu1 (NVIDIA, recording replay.json)'); None where every reading was measured."""
        if not self.replayed:
            return None
        return "Readings replayed, not measured: " + ", ".join(
            r.described for r in self.replayed)

    @property
    def empty(self) -> bool:
        """Prometheus recorded nothing of the job (GPU figures from elsewhere do not count)."""
        gpus = self.gpu_utilization if self.gpu_figures_from is None else ()
        return not (self.cpu_cores or self.memory_rss or gpus)

    @property
    def memory_held(self) -> tuple[Series, ...]:
        """Per node, what the job held over time (``held_memory``): the series the peak is
        the largest sample of, plotted and fitted."""
        return held_memory(self.memory_rss, self.memory_shmem)


class PeakSource(StrEnum):
    PROMETHEUS = "prometheus"  # the cgroup's RSS as the exporter sampled it, per node
    SACCT = "sacct"  # MaxRSS of the largest task x the tasks on its node: an estimate


@dataclass(frozen=True)
class MemoryPeak:
    """The job's memory peak on its busiest node: the one figure every part of a report
    shows and judges (``webapp.report.peak`` defines it)."""

    bytes: int
    source: PeakSource
    node: str | None = None  # the node that held it, when known
    step_id: str | None = None  # sacct: the step whose MaxRSS it is
    per_task_bytes: int | None = None  # sacct: MaxRSS, the largest single task
    tasks: int | None = None  # sacct: tasks on that node MaxRSS was multiplied by

    @property
    def estimate(self) -> bool:
        """sacct samples each task and keeps the largest: the job's peak is inferred."""
        return self.source == PeakSource.SACCT


@dataclass(frozen=True)
class NodeMemory:
    """One node's memory as the kernel and Slurm count it, each figure the largest of its
    own samples (they need not coincide); None where it was not measured."""

    node: str
    held_bytes: int | None  # anonymous + shared: what cannot be reclaimed (the peak's)
    anon_bytes: int | None  # heap, stacks (the cgroup's; a process's RSS without files)
    shmem_bytes: int | None  # files in /dev/shm or a tmpfs, shared anonymous mappings
    page_cache_bytes: int | None  # the page cache without the shared memory: reclaimable
    max_rss_bytes: int | None = None  # sacct's MaxRSS: the largest single task there
    # The node's own request (--mem; a het component's on its nodes) and its own peak by
    # the job peak's rule (``webapp.report.peak.node_memory``): what its efficiency is of.
    requested_bytes: int | None = None
    peak_bytes: int | None = None


def memory_judged(nodes: Iterable[NodeMemory]) -> NodeMemory | None:
    """The node a job's memory efficiency is that of: the highest peak over its own request
    among the nodes that have both (the larger peak on a tie); None when none has. With
    equal requests it is the busiest node; with unequal ones (a het job's components) each
    node is judged against its own request, never the job's total split evenly."""
    known = [n for n in nodes if n.peak_bytes is not None and n.requested_bytes]
    return max(known, key=lambda n: ((n.peak_bytes or 0) / (n.requested_bytes or 1),
                                     n.peak_bytes or 0), default=None)


def memory_by_node(nodes: Iterable[NodeMemory]) -> tuple[tuple[int, int | None], ...]:
    """Each node's own (request, peak) in bytes, as ``webapp.unused.Held`` reads them;
    () when a node's request is unknown (an older archived report)."""
    pairs = tuple((n.requested_bytes or 0, n.peak_bytes) for n in nodes)
    return pairs if pairs and all(asked for asked, _ in pairs) else ()


class CpuSource(StrEnum):
    STEPS = "sacct_steps"  # TotalCPU of the step lines, summed (seff's input)
    ALLOCATION = "sacct_allocation"  # TotalCPU of the allocation line: sacct listed no steps
    PROMETHEUS = "prometheus"  # the CPU rate integrated over the job (running, or no sacct)


@dataclass(frozen=True)
class ArrayTask:
    """One task of an array job, reduced to the numbers the summary compares."""

    job_id: str
    state: str
    elapsed_seconds: float | None
    cpu_efficiency: float | None
    memory_peak_bytes: int | None


@dataclass(frozen=True)
class ArraySummary:
    """Percentiles over an array's tasks and the request to use next time."""

    tasks: tuple[ArrayTask, ...]
    elapsed_p50: float | None
    elapsed_p95: float | None
    memory_peak_p50: float | None
    memory_peak_p95: float | None
    cpu_efficiency_p50: float | None
    cpu_efficiency_p95: float | None
    outliers: tuple[str, ...]
    suggested_mem: str | None
    suggested_time: str | None

    def state_counts(self) -> dict[str, int]:
        """Tasks per state, most frequent first."""
        counts: dict[str, int] = {}
        for task in self.tasks:
            counts[task.state] = counts.get(task.state, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class SizingSuggestion:
    """A ready ``#SBATCH`` block computed from the history of jobs like this one.

    ``options`` are (option, value) pairs in the order they are printed, e.g.
    ("--mem", "6G"); ``based_on`` is how many past jobs they come from;
    ``saved`` lists what the block would have saved, as plain phrases."""

    options: tuple[tuple[str, str], ...]
    based_on: int
    saved: tuple[str, ...] = ()
    basis: str = ""  # how the jobs were matched, e.g. "jobs named 'train' of alice, 30 days"

    def lines(self) -> list[str]:
        """The block as it goes in a batch script: one ``#SBATCH --opt=value`` per line."""
        return [f"#SBATCH {option}={value}" for option, value in self.options]


@dataclass(frozen=True)
class HistoryJob:
    """One past job in a history: what it asked for and what it used (bytes, seconds)."""

    job_id: str
    name: str | None
    state: str
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    elapsed_seconds: float | None
    time_limit_seconds: float | None
    cpus: int | None
    tasks: int  # tasks of its largest step: --cpus-per-task is per task
    nodes: int
    memory_requested_per_node: int | None  # --mem is per node
    gpus: int
    gpus_busy: int | None  # GPUs whose mean utilization reached the idle threshold
    cpu_seconds: float | None
    memory_peak: MemoryPeak | None
    # Each node's own request and peak (``NodeMemory``), as a report's; () where unknown.
    memory_nodes: tuple[NodeMemory, ...] = ()

    @property
    def cpu_efficiency(self) -> float | None:
        return cpu_efficiency(self.cpu_seconds, self.elapsed_seconds, self.cpus)

    @property
    def memory_efficiency(self) -> float | None:
        """The report's (``JobReport.memory_efficiency``): the judged node's peak over its
        own request; without per-node figures, the peak over the request per node."""
        judged = memory_judged(self.memory_nodes)
        if self.memory_peak is not None and judged is not None and judged.peak_bytes \
                is not None and judged.requested_bytes:
            return judged.peak_bytes / judged.requested_bytes
        if self.memory_peak is None or not self.memory_requested_per_node:
            return None
        return self.memory_peak.bytes / self.memory_requested_per_node

    @property
    def pending_seconds(self) -> float | None:
        if self.submit_time is None or self.start_time is None:
            return None
        return max(0.0, (self.start_time - self.submit_time).total_seconds())


@dataclass(frozen=True)
class History:
    """A user's past jobs of one name (or all their jobs) and the request they suggest."""

    user: str | None
    name: str | None
    since: datetime
    jobs: tuple[HistoryJob, ...]  # newest first
    sizing: SizingSuggestion | None = None


@dataclass(frozen=True)
class JobReport:
    """Everything known about one job, from every source, after precedence is applied."""

    job_id: str
    cluster: str
    user: str | None = None
    uid: int | None = None
    account: str | None = None
    job_name: str | None = None
    partition: str | None = None
    qos: str | None = None  # the QoS it ran under (policy scopes match on it)
    nodes: tuple[str, ...] = ()
    work_dir: str | None = None
    # request
    cpus: int | None = None
    memory_requested_bytes: int | None = None
    gpus: int = 0
    time_limit_seconds: float | None = None  # the limit that applied, when finite and known
    time_limit_kind: TimeLimitKind | None = None
    # outcome
    state: str | None = None
    exit_code: str | None = None
    cancelled_by: int | None = None  # uid that cancelled the job (sacct's "CANCELLED by N")
    array_job: int | None = None  # the array's job id when this job is one of its tasks
    submit_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    elapsed_seconds: float | None = None
    # The record the single figures come from, when it is not ``job_id`` itself: the task
    # shown for an array id (123 -> 123_4), the leading component of a het job.
    figures_from: str | None = None
    # usage
    cpu_seconds: float | None = None
    cpu_source: CpuSource | None = None
    memory_peak: MemoryPeak | None = None
    memory_nodes: tuple[NodeMemory, ...] = ()  # the peak's parts per node (report.peak)
    usage: Usage = field(default_factory=Usage)
    steps: tuple[Step, ...] = ()
    array: ArraySummary | None = None  # set when ``job_id`` names a whole array
    gaps: tuple[Gap, ...] = ()
    # What the data covers where it is less than everything (e.g. the plots' resolution).
    notes: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    queue: QueueContext | None = None  # why it waited; filled by the report service
    sizing: SizingSuggestion | None = None  # next submission's #SBATCH block, from history
    components: tuple[Step, ...] = ()  # a het job's components, one line each
    node_events: tuple[NodeEvent, ...] = ()  # its nodes down or drained during its run
    metrics_id: str | None = None  # the id the exporter labels its series with (jobid)
    metrics_ids: tuple[str, ...] = ()  # a whole het job's: every component's (precedence)
    billing: float | None = None  # billing units per hour of the allocation (billing TRES)
    # Computed once by webapp.report (steps, waste, coverage); every renderer reads them.
    step_lines: tuple[StepLine, ...] = ()
    waste: Waste | None = None
    energy: Energy | None = None
    coverage: Coverage | None = None  # what the Prometheus verdicts rest on
    audit: Audit | None = None

    @property
    def cpu_efficiency(self) -> float | None:
        return cpu_efficiency(self.cpu_seconds, self.elapsed_seconds, self.cpus)

    @property
    def memory_peak_bytes(self) -> int | None:
        return self.memory_peak.bytes if self.memory_peak else None

    @property
    def gpu_memory_peak_bytes(self) -> float | None:
        """The most memory any one allocated GPU held (its series' highest sample)."""
        peaks = [m for s in self.usage.gpu_memory_used if (m := s.max()) is not None]
        return max(peaks) if peaks else None

    @property
    def gpu_utilization(self) -> float | None:
        """Mean utilisation of the allocated GPUs (each GPU's mean, averaged), 0..1."""
        return gpu_utilization(self.usage.gpu_utilization)

    @property
    def memory_judged(self) -> NodeMemory | None:
        """The node whose peak over its own request is the job's memory efficiency
        (``memory_judged``); None when no node has both (an older archived report)."""
        return memory_judged(self.memory_nodes)

    @property
    def memory_requests_uneven(self) -> bool:
        """The nodes asked for different amounts (a het job's components): a request is
        then that of one node, never "per node"."""
        return len({n.requested_bytes for n in self.memory_nodes if n.requested_bytes}) > 1

    @property
    def memory_by_node(self) -> tuple[tuple[int, int | None], ...]:
        """Each node's own (request, peak) (``memory_by_node``)."""
        return memory_by_node(self.memory_nodes)

    @property
    def memory_requested_per_node(self) -> int | None:
        """--mem is per node: the judged node's own request (``memory_judged``), else the
        request split evenly over the job's nodes."""
        if (judged := self.memory_judged) is not None:
            return judged.requested_bytes
        if not self.memory_requested_bytes:
            return None
        return self.memory_requested_bytes // max(1, len(self.nodes))

    @property
    def memory_judged_peak_bytes(self) -> int | None:
        """The peak the memory efficiency is of: the judged node's, else the job's."""
        judged = self.memory_judged
        return judged.peak_bytes if judged is not None else self.memory_peak_bytes

    @property
    def memory_efficiency(self) -> float | None:
        """The highest of each node's peak over its own request (``memory_judged``);
        without per-node figures, the busiest node's peak over the request per node."""
        per_node = self.memory_requested_per_node
        peak = self.memory_judged_peak_bytes
        if self.memory_peak is None or peak is None or not per_node:
            return None
        return peak / per_node

    @property
    def time_used(self) -> float | None:
        """Elapsed over the time limit that applied (None without a finite limit)."""
        if self.elapsed_seconds is None or not self.time_limit_seconds:
            return None
        return self.elapsed_seconds / self.time_limit_seconds

    @property
    def running(self) -> bool:
        """Allocated and not ended: its processes may still be using resources."""
        return states.running(self.state)

    @property
    def unfinished(self) -> bool:
        """Not ended yet (waiting in the queue, or requeued to run again, counts): too early
        for a verdict or an email."""
        return not states.ended(self.state)


@dataclass(frozen=True)
class StepLine:
    """One line of the steps table: an srun step or a het component, seff's figures each."""

    step_id: str  # "batch", "0", "1", ... or "123+1" for a het component
    kind: str  # "step" or "component"
    name: str
    state: str
    exit_code: str
    elapsed_seconds: float | None
    cpus: int | None
    cpu_seconds: float | None
    cpu_efficiency: float | None  # TotalCPU / (Elapsed x AllocCPUS) of this line
    memory_peak_bytes: int | None  # MaxRSS x tasks per node (peak.step_peak)
    tasks: int | None = None

    @property
    def idle_core_seconds(self) -> float | None:
        """Allocated core-seconds the line did not use."""
        if self.cpu_seconds is None or not self.elapsed_seconds or not self.cpus:
            return None
        return max(0.0, self.elapsed_seconds * self.cpus - self.cpu_seconds)


@dataclass(frozen=True)
class WasteItem:
    """One resource's allocated-but-unused amount, in its own unit and the site's."""

    resource: str  # "cpu", "gpu", "memory"
    unit: str  # "core-hours", "GPU-hours", "GiB-hours"
    requested: float  # allocated x hours
    unused: float  # requested - used (never negative)
    billing_weight: float | None  # billing units per unit-hour of this resource
    billing_units: float | None  # unused x weight
    core_hours: float | None  # billing_units x the site's core-hours per billing unit


@dataclass(frozen=True)
class Waste:
    """The waste figures of a job and how they were priced."""

    items: tuple[WasteItem, ...]
    billing_per_hour: float | None  # the job's billing TRES
    weights_source: str  # where the weights come from, in words
    core_hours_per_billing_unit: float | None = None

    def total_billing_units(self) -> float | None:
        values = [i.billing_units for i in self.items if i.billing_units is not None]
        return sum(values) if values else None


@dataclass(frozen=True)
class Energy:
    """The job's energy, that of its unused allocation, and its carbon (webapp.report.energy)."""

    joules: float
    by_node: tuple[tuple[str, float], ...]  # (node, joules)
    unused_cores_joules: float | None  # the cores' share of the node meter x idle CPU time
    unused_gpus_joules: float | None  # the GPUs' joules x their idle fraction
    intensity_g_per_kwh: float | None  # grams CO2e per kWh used; None: none configured
    intensity_source: str  # where the intensity comes from, in words
    co2e_grams: float | None

    @property
    def unused_joules(self) -> float | None:
        parts = [j for j in (self.unused_cores_joules, self.unused_gpus_joules) if j is not None]
        return sum(parts) if parts else None


@dataclass(frozen=True)
class Verdict:
    """What one detector's verdict rests on and whether it was given or withheld."""

    detector: str
    rests_on: str  # e.g. "sacct (TotalCPU)", "Prometheus (jobs_cpu_core_seconds_total)"
    withheld: bool
    why: str = ""


@dataclass(frozen=True)
class Audit:
    """What the report's verdicts rest on: sources, thresholds, the code's and the site
    policy's versions (webapp/detectors/rules_version.py), verdicts."""

    sources: tuple[tuple[str, str], ...]  # (source, "used" or the gap's reason)
    thresholds: tuple[tuple[str, float, bool], ...]  # (name, value, overridden by settings)
    rules_version: str  # the code's version: every module a verdict rests on
    min_coverage: float
    verdicts: tuple[Verdict, ...] = ()
    # the site's: its policy files and the settings changing a verdict; None: the defaults
    policy_version: str | None = None


@dataclass(frozen=True)
class SeriesCoverage:
    """How much of the job's run one node's (or one GPU's) samples cover."""

    label: str  # node name, or "node/gpu" for a GPU
    samples: int
    interval_seconds: float | None  # the median spacing of the samples seen
    covered_seconds: float
    fraction: float  # covered / the job's run, 0..1
    gaps: tuple[tuple[float, float], ...] = ()  # (from, to) unix seconds without samples


@dataclass(frozen=True)
class Coverage:
    """The samples behind the Prometheus figures: per node and per GPU, and the queries."""

    nodes: tuple[SeriesCoverage, ...] = ()
    gpus: tuple[SeriesCoverage, ...] = ()
    queries: tuple[tuple[str, str], ...] = ()  # (name, PromQL) as sent

    @property
    def node_fraction(self) -> float | None:
        """The least-covered node's fraction (a verdict is as good as its weakest node)."""
        return min((n.fraction for n in self.nodes), default=None)

    @property
    def gpu_fraction(self) -> float | None:
        return min((g.fraction for g in self.gpus), default=None)


@dataclass(frozen=True)
class PendingReason:
    """One reason Slurm gave while the job waited, and for how long the exporter saw it."""

    reason: str
    seconds: float
    first_seen: datetime


@dataclass(frozen=True)
class QueueContext:
    """The job's wait in the queue and the state of its partition when it was submitted.

    ``gpus_*`` are (GPU type, count) pairs. Numbers are None when Prometheus had no
    slurm-exporter sample for them; ``usual_time_limit_seconds`` is the median time
    limit of the partition's recent jobs (accounting view), for comparison."""

    partition: str | None
    pending_seconds: float | None  # start - submit (until now while still pending)
    reasons: tuple[PendingReason, ...] = ()
    cpus_idle: int | None = None  # partition at submit time
    cpus_total: int | None = None
    gpus_available: tuple[tuple[str, int], ...] = ()
    queue_length: int | None = None  # pending jobs of the partition just before submit
    gpus_available_max: tuple[tuple[str, int], ...] = ()  # most available during the wait
    requested_gpu_types: tuple[str, ...] = ()  # from TRES gres/gpu:<type>
    usual_time_limit_seconds: float | None = None
    usual_time_limit_jobs: int = 0  # how many jobs the median is over
    seen: bool = False  # slurm-exporter series covered the wait
    long_wait: bool = False  # longer than the settings' queue_note_seconds: worth a note
