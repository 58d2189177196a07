"""The staff report's settings block: every threshold and partition list in one record,
overridable by name from ``JOBREPORT_STAFF_REPORT`` (``name=value,...``; lists as
``a|b``). Ratios 0..1, sizes GiB, durations hours unless named otherwise."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class StaffConfig:
    days: float = 7.0  # the window, ending now (or at --until)
    rows: float = 20.0  # rows per table
    partitions: tuple[str, ...] = ()  # only these partitions' jobs (empty: all)
    # heaviest users with low efficiency: ranked among all users by hours used
    cpu_efficiency_low: float = 0.5
    gpu_efficiency_low: float = 0.3
    min_core_hours: float = 1.0  # users below this many core-/GPU-hours are not ranked
    min_gpu_hours: float = 1.0
    # jobs that could have used a smaller GPU or a MIG slice
    small_gpu_util: float = 0.3
    small_gpu_memory: float = 0.5  # peak GPU memory / the GPU's memory
    # multi-node jobs: a node below this many cores busy on average did nothing
    node_idle_cores: float = 0.01
    min_runtime_hours: float = 0.0  # shorter jobs are left out of the per-job tables
    # large-memory partitions and the peak (GiB) that justifies them
    large_memory_partitions: tuple[str, ...] = ()
    large_memory_need_gib: float = 192.0
    # repeat offenders: alerts counted over this many days
    notice_days: float = 30.0

    @classmethod
    def parse(cls, text: str) -> StaffConfig:
        """``days=7,large_memory_partitions=bigmem|fat``; ValueError naming a bad item."""
        kinds = {f.name: f.type for f in fields(cls)}
        changes: dict[str, object] = {}
        for item in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = (x.strip() for x in item.partition("="))
            if not sep or name not in kinds:
                raise ValueError(f"JOBREPORT_STAFF_REPORT: {item!r} is not name=value with a "
                                 f"name among {', '.join(kinds)}")
            if "tuple" in str(kinds[name]):
                changes[name] = tuple(v for v in value.split("|") if v)
                continue
            try:
                number = float(value)
            except ValueError:
                number = -1.0
            if not number >= 0:
                raise ValueError(f"JOBREPORT_STAFF_REPORT: {name} must be a number >= 0")
            changes[name] = number
        return replace(cls(), **changes)
