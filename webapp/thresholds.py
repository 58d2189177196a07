"""Every threshold of the report service in one table: the detectors' (a finding in a job's
report), `jobreport watch`'s (an alert on a running job) and the staff report's (who and
what its tables list). Each is declared once, with its default, unit, help and the parts
that read it, and overridden by name in one variable, ``JOBREPORT_THRESHOLDS``::

    JOBREPORT_THRESHOLDS=cpu_efficiency_low=0.5,gpu_idle_seconds=1800

Detector defaults follow what sites already tell their users (Princeton's jobstats, the
Alliance / Calcul Québec job-efficiency pages): a GPU below 1 % is idle, below 15 % is
underused; CPU efficiency under 65 % and memory use under 70 % of the request are worth a
note when the waste is large enough to matter. A name carries its unit where it is not a
ratio (0..1): ``_bytes``, ``_seconds``, ``_hours``, ``_gib``, ``_cores``.

The staff report's window and partition lists are options, not thresholds: ``StaffConfig``
(``JOBREPORT_STAFF_REPORT``), parsed by the same parser.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # what dataclasses.fields and replace take

from jobreport_common.settings import SettingsError, ranged
from jobreport_common.units import GIB, MIB

T = TypeVar("T", bound="DataclassInstance")

NON_NEGATIVE = ranged(at_least=0)
# The staff report's window: JOBREPORT_STAFF_REPORT's days and `staff-report --days`.
STAFF_DAYS = ranged(above=0, at_most=366)

# Which part reads a threshold.
DETECTORS, WATCH, STAFF = "detectors", "watch", "staff report"
PARTS = (DETECTORS, WATCH, STAFF)

# Units as the table shows them.
RATIO, BYTES, SECONDS, HOURS, GIB_UNIT, CORES, COUNT, FACTOR = (
    "ratio", "bytes", "seconds", "hours", "GiB", "cores", "count", "factor")


def threshold(default: float, unit: str, help: str, *parts: str) -> Any:
    """One row of the table: a field of ``Thresholds``."""
    if not parts or not set(parts) <= set(PARTS):
        raise ValueError(f"threshold parts {parts!r}: use some of {PARTS}")
    return dataclasses.field(default=float(default),
                             metadata={"unit": unit, "help": help, "parts": parts})


@dataclass(frozen=True)
class Thresholds:
    # GPUs (mean utilisation, per allocated GPU)
    gpu_idle: float = threshold(0.01, RATIO, "A GPU below this mean utilisation is idle.",
                                DETECTORS, WATCH)
    gpu_util_low: float = threshold(0.15, RATIO, "A GPU below this mean utilisation is "
                                    "underused.", DETECTORS)
    # CPUs
    cpu_efficiency_low: float = threshold(
        0.65, RATIO, "CPU efficiency (CPU time / cores x elapsed) below this is low: a job's "
        "finding, and a heavy user's row in the staff report.", DETECTORS, STAFF)
    serial_cores_max: float = threshold(
        1.25, CORES, "About one core busy on a multi-core allocation: serial.", DETECTORS)
    oversubscription_ratio: float = threshold(
        1.25, FACTOR, "Threads (or busy cores) per allocated core that oversubscribe.",
        DETECTORS)
    oversubscription_busy: float = threshold(
        0.9, RATIO, "Threads only hurt when the cores are this busy.", DETECTORS)
    oversubscription_wrapper_threads: float = threshold(
        3.0, COUNT, "Sleeping threads of the batch shell, srun and wrappers such as "
        "timeout(1), not counted against the job.", DETECTORS)
    # Why cores sat idle (cgroup v2 PSI): share of the run some task waited for a CPU or for
    # storage, and for memory (any sustained reclaim stall costs more, so lower)
    pressure_high: float = threshold(
        0.20, RATIO, "Share of the run some task waited for a CPU or for storage.", DETECTORS)
    memory_pressure_high: float = threshold(
        0.10, RATIO, "Share of the run some task stalled on memory reclaim.", DETECTORS)
    # GPU feeding
    core_saturated: float = threshold(
        0.85, RATIO, "A core this busy on average is saturated.", DETECTORS)
    gpu_memory_in_use_bytes: float = threshold(
        256 * MIB, BYTES, "A GPU holding this much memory was opened by the program.",
        DETECTORS)
    gpu_cores_idle_min_gpu_util: float = threshold(
        0.50, RATIO, "GPUs at this mean utilisation or more are busy, for gpu_cores_idle "
        "(cores idle beside busy GPUs).", DETECTORS)
    gpu_cores_idle_min_cores: float = threshold(
        2.0, CORES, "Idle cores beside busy GPUs worth a finding (gpu_cores_idle).", DETECTORS)
    # GPU memory: a large GPU whose peak stayed low would fit a smaller type
    gpu_memory_large_bytes: float = threshold(
        32 * GIB, BYTES, "A GPU at least this large is worth a smaller-type advice.", DETECTORS)
    gpu_memory_low: float = threshold(
        0.25, RATIO, "Peak GPU memory below this share of the GPU's is low.", DETECTORS)
    gpu_memory_margin: float = threshold(
        1.25, FACTOR, "Headroom on the GPU memory peak in advice.", DETECTORS)
    # memory growth (reports)
    memory_growth_min_share: float = threshold(
        0.25, RATIO, "The fitted line adds this share of the limit over the job (an ended "
        "job's finding; the running job's is memory_fit_min_share).", DETECTORS)
    memory_growth_fit: float = threshold(
        0.90, RATIO, "The fit is at least this good (r squared).", DETECTORS)
    memory_growth_min_points: float = threshold(
        5.0, COUNT, "Points the fit needs at least.", DETECTORS)
    memory_growth_late: float = threshold(
        0.5, RATIO, "The last third still rises at this share of the overall slope (a "
        "plateau does not).", DETECTORS)
    # memory
    memory_efficiency_low: float = threshold(
        0.70, RATIO, "Peak memory below this share of the request is low.", DETECTORS)
    memory_waste_min_bytes: float = threshold(
        2 * GIB, BYTES, "Below this unused memory a generous request is harmless.", DETECTORS)
    memory_near_limit: float = threshold(
        0.90, RATIO, "A peak of memory that cannot be reclaimed (anonymous + shared, not the "
        "page cache) above this share of the limit is near it.", DETECTORS)
    memory_margin: float = threshold(
        1.2, FACTOR, "Headroom added to the peak in --mem advice.", DETECTORS)
    oom_growth: float = threshold(
        1.5, FACTOR, "An OOM-killed job's peak is the limit: ask for this much more.",
        DETECTORS)
    # files in /dev/shm or another tmpfs (shared memory): small ones are MPI's and
    # multiprocessing's own; a large share of what the job held is files kept in memory
    tmpfs_memory_min_bytes: float = threshold(
        512 * MIB, BYTES, "Shared memory (tmpfs, /dev/shm files) on a node below this is "
        "not worth a finding.", DETECTORS)
    tmpfs_memory_share: float = threshold(
        0.25, RATIO, "... nor below this share of what the job held there (anonymous + "
        "shared).", DETECTORS)
    # time
    time_used_low: float = threshold(
        0.10, RATIO, "Elapsed below this share of the time limit is low.", DETECTORS)
    time_waste_min_seconds: float = threshold(
        3600.0, SECONDS, "Below this unused time a generous limit is harmless.", DETECTORS)
    time_margin: float = threshold(
        1.3, FACTOR, "Headroom added to elapsed in --time advice.", DETECTORS)
    timeout_growth: float = threshold(
        1.5, FACTOR, "A timed-out job's limit times this is the advice.", DETECTORS)
    short_job_seconds: float = threshold(
        300.0, SECONDS, "A job shorter than this is short.", DETECTORS)
    min_runtime_seconds: float = threshold(
        300.0, SECONDS, "Efficiency verdicts on shorter jobs are noise.", DETECTORS)
    # I/O and files
    io_heavy_bytes: float = threshold(
        10 * GIB, BYTES, "Bytes read and written that make a job I/O-heavy.", DETECTORS)
    io_small_request_bytes: float = threshold(
        8192.0, BYTES, "Mean bytes per read/write call below this are small (a tiny write "
        "still dirties a ~4 KiB page).", DETECTORS)
    io_many_syscalls: float = threshold(
        1_000_000.0, COUNT, "Read/write calls that are many.", DETECTORS)
    open_files_many: float = threshold(
        1000.0, COUNT, "Open files that are many.", DETECTORS)
    open_files_ratio_high: float = threshold(
        0.8, RATIO, "Open files above this share of the limit are near it.", DETECTORS)
    # queue
    queue_wait_min_seconds: float = threshold(
        1800.0, SECONDS, "A queue wait worth a finding.", DETECTORS)
    time_limit_usual_factor: float = threshold(
        4.0, FACTOR, "A time limit this far past the partition's usual (its 30-day median).",
        DETECTORS)
    time_limit_usual_min_jobs: float = threshold(
        20.0, COUNT, "Jobs that make the partition's median meaningful.", DETECTORS)
    # `jobreport watch`: a condition must hold over a trailing window
    gpu_idle_seconds: float = threshold(
        3600.0, SECONDS, "Every allocated GPU below gpu_idle this long.", WATCH)
    node_idle_seconds: float = threshold(
        1800.0, SECONDS, "One node of a multi-node job below node_idle_cores this long.",
        WATCH)
    node_idle_cores: float = threshold(
        0.01, CORES, "A node below this many cores busy on average did nothing.",
        DETECTORS, WATCH, STAFF)
    gpu_ecc_corrected: float = threshold(
        100.0, COUNT, "Corrected memory errors one GPU may report over a job before it is "
        "named a hardware fault (ECC corrects a few as a matter of course).", DETECTORS)
    memory_fit_seconds: float = threshold(
        1800.0, SECONDS, "Memory growth is fitted over this window, projected to the time "
        "limit.", WATCH)
    memory_fit_min_points: float = threshold(
        6.0, COUNT, "Points the running job's memory fit needs at least.", WATCH)
    memory_fit_min_share: float = threshold(
        0.05, RATIO, "The running job's fit must add this share of the limit per window (no "
        "alarm on noise).", WATCH)
    time_used: float = threshold(
        0.90, RATIO, "A running job this far into its time limit ...", WATCH)
    output_seconds: float = threshold(
        1800.0, SECONDS, "... that wrote less than output_min_bytes in this window.", WATCH)
    output_min_bytes: float = threshold(
        1 * MIB, BYTES, "Output below this is none.", WATCH)
    small_files_seconds: float = threshold(
        600.0, SECONDS, "Window of the small-writes-off-scratch rule.", WATCH)
    small_files_writes: float = threshold(
        10_000.0, COUNT, "Writes in the window that are many.", WATCH)
    small_files_write_bytes: float = threshold(
        8192.0, BYTES, "Mean bytes per write below this are small, for the "
        "small-writes-off-scratch rule (an ended job's calls: io_small_request_bytes).",
        WATCH)
    coverage: float = threshold(
        0.8, RATIO, "Share of a window the series must cover before a watch rule judges it.",
        WATCH)
    # staff report (sizes GiB, durations hours)
    low_efficiency_users_gpu_util: float = threshold(
        0.3, RATIO, "A heavy user's GPU utilisation below this is low (the low-efficiency "
        "users' table).", STAFF)
    min_core_hours: float = threshold(
        1.0, HOURS, "Users below this many core-hours are not ranked.", STAFF)
    min_gpu_hours: float = threshold(
        1.0, HOURS, "Users below this many GPU-hours are not ranked.", STAFF)
    smaller_gpu_util: float = threshold(
        0.3, RATIO, "Jobs below this GPU utilisation could use a smaller GPU or MIG slice ...",
        STAFF)
    smaller_gpu_memory: float = threshold(
        0.5, RATIO, "... when their peak GPU memory stayed under this share of the GPU's.",
        STAFF)
    min_runtime_hours: float = threshold(
        0.0, HOURS, "Shorter jobs are left out of the per-job tables.", STAFF)
    large_memory_need_gib: float = threshold(
        192.0, GIB_UNIT, "The peak that justifies a large-memory partition.", STAFF)
    # Not a threshold: the names JOBREPORT_THRESHOLDS set (the audit marks them).
    overridden: frozenset[str] = dataclasses.field(default=frozenset(), compare=False)

    def part(self, part: str) -> dict[str, float]:
        """The thresholds ``part`` reads, by name, in table order."""
        return {row.name: getattr(self, row.name) for row in TABLE if part in row.parts}


class Row(NamedTuple):
    name: str
    default: float
    unit: str
    help: str
    parts: tuple[str, ...]


# Thresholds renamed so that each name says what it holds and near-twins are told apart.
# A site's JOBREPORT_THRESHOLDS that still sets an old name is refused with the new one:
# an override must never silently stop applying (docs/settings.md, "Renamed thresholds").
RENAMED = {
    "gpu_busy": "gpu_cores_idle_min_gpu_util",
    "gpu_idle_cores_min": "gpu_cores_idle_min_cores",
    "memory_growth_min": "memory_growth_min_share",
    "memory_min_points": "memory_fit_min_points",
    "memory_min_growth": "memory_fit_min_share",
    "small_write_bytes": "small_files_write_bytes",
    "gpu_efficiency_low": "low_efficiency_users_gpu_util",
    "small_gpu_util": "smaller_gpu_util",
    "small_gpu_memory": "smaller_gpu_memory",
}

# Every threshold has a plain default (``threshold()``): a field without one has no row.
TABLE: tuple[Row, ...] = tuple(
    Row(f.name, f.default, f.metadata["unit"], f.metadata["help"], f.metadata["parts"])
    for f in dataclasses.fields(Thresholds)
    if "unit" in f.metadata and f.default is not dataclasses.MISSING)


@dataclass(frozen=True)
class StaffConfig:
    """The staff report's window, table length and partition lists (``a|b``)."""

    days: float = dataclasses.field(  # the window, ending now (or at --until)
        default=7.0, metadata={"parse": STAFF_DAYS})
    rows: float = 20.0  # rows per table
    partitions: tuple[str, ...] = ()  # only these partitions' jobs (empty: all)
    large_memory_partitions: tuple[str, ...] = ()
    notice_days: float = 30.0  # repeat offenders: alerts counted over this many days


def parse_pairs(var: str, text: str) -> dict[str, str]:
    """``a=1, b=x|y`` -> ``{"a": "1", "b": "x|y"}``; SettingsError naming ``var`` and the
    item that is not ``name=value``."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = (x.strip() for x in item.partition("="))
        if not sep or not name:
            raise SettingsError(f"{var}: {item!r} is not name=value")
        out[name] = value
    return out


def apply_overrides(cls: type[T], var: str, text: str) -> T:
    """``cls()`` with ``var``'s ``name=value,...`` applied: numbers >= 0 (or in the range
    of the field's ``parse``), and ``a|b`` lists for tuple fields. SettingsError naming
    ``var`` and the bad name or value."""
    kinds = {f.name: str(f.type) for f in dataclasses.fields(cls)
             if f.name != "overridden"}
    ranges = {f.name: f.metadata["parse"] for f in dataclasses.fields(cls)
              if "parse" in f.metadata}
    changes: dict[str, Any] = {}
    for name, value in parse_pairs(var, text).items():
        if name not in kinds:
            raise SettingsError(f"{var}: unknown name {name!r}; known: {', '.join(kinds)}")
        if "tuple" in kinds[name]:
            changes[name] = tuple(v.strip() for v in value.split("|") if v.strip())
            continue
        changes[name] = ranges.get(name, NON_NEGATIVE)(f"{var}: {name}", value)
    if "overridden" in {f.name for f in dataclasses.fields(cls)}:
        changes["overridden"] = frozenset(changes)
    return dataclasses.replace(cls(), **changes)


def parse_thresholds(var: str, text: str) -> Thresholds:
    """``JOBREPORT_THRESHOLDS``: the table's defaults with the named ones replaced; a
    renamed threshold's old name is refused with its new one."""
    old = [name for name in parse_pairs(var, text) if name in RENAMED]
    if old:
        raise SettingsError(f"{var}: " + "; ".join(
            f"{name!r} was renamed {RENAMED[name]!r}" for name in old))
    return apply_overrides(Thresholds, var, text)


def parse_staff_config(var: str, text: str) -> StaffConfig:
    """``JOBREPORT_STAFF_REPORT``: ``days=14,large_memory_partitions=bigmem|fat``."""
    moved = sorted(set(parse_pairs(var, text)) & {row.name for row in TABLE})
    if moved:
        raise SettingsError(f"{var}: {', '.join(moved)} is a threshold: set it in "
                            "JOBREPORT_THRESHOLDS")
    return apply_overrides(StaffConfig, var, text)

