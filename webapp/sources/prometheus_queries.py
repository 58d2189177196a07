"""The named PromQL a report asks Prometheus, and how one-number figures share a request.

Templates take ``{sel}`` (the job selector), ``{node}`` (the label naming a node),
``{rate}`` (a rate window), ``{window}`` (the job's whole window), ``{tail}`` (a short
window before its end) and ``{start}`` (its start, unix seconds). Every metric used is
one the exporter emits (a test checks that against exporter/).

Prometheus' cost is the samples it decodes: a 7-day, 8-node job has 20,000 per series.
So a figure that a counter or a high-watermark already holds is read from the job's last
samples (``TAIL_FIGURES``), and only the gauges whose peak may lie anywhere are scanned
over the whole window (``WINDOW_FIGURES``); several figures go in one request.
"""

from __future__ import annotations

import math

# Range queries: name -> (PromQL template, label that names each series).
RANGE_QUERIES: dict[str, tuple[str, str]] = {
    "cpu_cores": ("sum by ({node}) (rate(jobs_cpu_seconds_total{{{sel}}}[{rate}]))", "{node}"),
    "memory_rss": ("sum by ({node}) (jobs_memory_rss_bytes{{{sel}}})", "{node}"),
    # shared memory (tmpfs, /dev/shm) and the page cache that includes it: with the RSS,
    # what the job held and what the kernel could have reclaimed (webapp.report.peak)
    "memory_shmem": ("sum by ({node}) (jobs_memory_shmem_bytes{{{sel}}})", "{node}"),
    "memory_cache": ("sum by ({node}) (jobs_memory_cache_bytes{{{sel}}})", "{node}"),
    "gpu_utilization": (
        "max by ({node}, gpu) (jobs_gpu_utilization_ratio{{{sel}}})",
        "{node}/gpu",
    ),
    "gpu_memory_used": (
        "max by ({node}, gpu) (jobs_gpu_memory_used_bytes{{{sel}}})",
        "{node}/gpu",
    ),
    "io_read_rate": (
        "sum by ({node}) (rate(jobs_read_bytes_total{{{sel}}}[{rate}]))",
        "{node}",
    ),
    "io_write_rate": (
        "sum by ({node}) (rate(jobs_write_bytes_total{{{sel}}}[{rate}]))",
        "{node}",
    ),
}

# Per-node-and-core values at the job's end: (query, fallback, label).
# Per-core use is a whole-job mean per core: a job's cpuacct counters start at zero with its
# cgroup, so the last sample divided by the time since the job started is the mean. The
# query asks for each core's raw samples of the last {lookback} before one scrape after the
# job's end (the staleness lookback, so the same sample an instant selector finds) and the
# division is done here: one sample per core instead of rate() over every sample (a 256-core week is
# 5 M). If that finds nothing (clock skew, a gap at the end) the rate over the whole job
# is the fallback.
VECTOR_QUERIES: dict[str, tuple[str, str, str]] = {
    "cpu_per_core": (
        "jobs_cpu_core_seconds_total{{{sel}}}[{lookback}]",
        "sum by ({node}, core) (rate(jobs_cpu_core_seconds_total{{{sel}}}[{window}]))",
        "{node}/core",
    ),
}

# One number each over the job's whole window: the definition of every figure below.
# Memory limits are per node (each node's cgroup has the job's --mem), so their max.
WINDOW_QUERIES: dict[str, str] = {
    "memory_limit_bytes": "max(max_over_time(jobs_memory_limit_bytes{{{sel}}}[{window}]))",
    "memory_max_usage_bytes": "sum(max_over_time(jobs_memory_max_usage_bytes{{{sel}}}[{window}]))",
    "gpu_memory_total_bytes": "max(max_over_time(jobs_gpu_memory_total_bytes{{{sel}}}[{window}]))",
    "read_bytes": "sum(max_over_time(jobs_read_bytes_total{{{sel}}}[{window}]))",
    "write_bytes": "sum(max_over_time(jobs_write_bytes_total{{{sel}}}[{window}]))",
    "read_syscalls": "sum(max_over_time(jobs_read_syscalls_total{{{sel}}}[{window}]))",
    "write_syscalls": "sum(max_over_time(jobs_write_syscalls_total{{{sel}}}[{window}]))",
    "processes_max": "max(max_over_time(jobs_processes{{{sel}}}[{window}]))",
    "threads_max": "max(max_over_time(jobs_threads{{{sel}}}[{window}]))",
    "open_files_max": "max(max_over_time(jobs_open_files{{{sel}}}[{window}]))",
    "open_files_limit_ratio_max": (
        "max(max_over_time(jobs_open_files_limit_ratio{{{sel}}}[{window}]))"
    ),
    "scratch_in_use": "max(max_over_time(jobs_scratch_in_use{{{sel}}}[{window}]))",
    # cgroup v2 only: the busiest node's totals (counters from the job's cgroup creation)
    "cpu_pressure_seconds": (
        'max(max_over_time(jobs_pressure_waiting_seconds_total{{{sel},resource="cpu"}}[{window}]))'
    ),
    "io_pressure_seconds": (
        'max(max_over_time(jobs_pressure_waiting_seconds_total{{{sel},resource="io"}}[{window}]))'
    ),
    "memory_pressure_seconds": (
        'max(max_over_time(jobs_pressure_waiting_seconds_total{{{sel},resource="memory"}}'
        "[{window}]))"
    ),
    "memory_high_events": (
        'max(max_over_time(jobs_memory_events_total{{{sel},event="high"}}[{window}]))'
    ),
    # per-thread waits (cgroup v1 and v2): counters summed over nodes; busy threads' peak
    "cpu_wait_seconds": "sum(max_over_time(jobs_cpu_wait_seconds_total{{{sel}}}[{window}]))",
    "io_wait_seconds": "sum(max_over_time(jobs_io_wait_seconds_total{{{sel}}}[{window}]))",
    "busy_tasks_max": "max(max_over_time(jobs_busy_tasks{{{sel}}}[{window}]))",
    # Joules the exporter split to the job: counters from the job's start, summed over
    # nodes and sources.
    "energy_joules": "sum(max_over_time(jobs_energy_joules_total{{{sel}}}[{window}]))",
    "energy_gpu_joules": (
        'sum(max_over_time(jobs_energy_joules_total{{{sel},source="gpu"}}[{window}]))'
    ),
    "energy_other_joules": (
        'sum(max_over_time(jobs_energy_joules_total{{{sel},source="other"}}[{window}]))'
    ),
}

# Figures whose largest value is their last: the exporter's counters never go down (I/O
# totals keep exited processes), cgroup max_usage is a high-watermark, limits and a GPU's
# memory are constant. name -> (how nodes combine, metric). Read per node from the last
# samples before the job's end; a node that has series in the window but none there (its
# exporter stopped early) sends that figure back to its WINDOW_QUERIES definition.
TAIL_FIGURES: dict[str, tuple[str, str]] = {
    "memory_limit_bytes": ("max", "jobs_memory_limit_bytes"),
    "memory_max_usage_bytes": ("sum", "jobs_memory_max_usage_bytes"),
    "gpu_memory_total_bytes": ("max", "jobs_gpu_memory_total_bytes"),
    "read_bytes": ("sum", "jobs_read_bytes_total"),
    "write_bytes": ("sum", "jobs_write_bytes_total"),
    "read_syscalls": ("sum", "jobs_read_syscalls_total"),
    "write_syscalls": ("sum", "jobs_write_syscalls_total"),
    "cpu_pressure_seconds": ("max", 'jobs_pressure_waiting_seconds_total{resource="cpu"}'),
    "io_pressure_seconds": ("max", 'jobs_pressure_waiting_seconds_total{resource="io"}'),
    "memory_pressure_seconds": ("max", 'jobs_pressure_waiting_seconds_total{resource="memory"}'),
    "memory_high_events": ("max", 'jobs_memory_events_total{event="high"}'),
    "cpu_wait_seconds": ("sum", "jobs_cpu_wait_seconds_total"),
    "io_wait_seconds": ("sum", "jobs_io_wait_seconds_total"),
    "energy_joules": ("sum", "jobs_energy_joules_total"),
    "energy_gpu_joules": ("sum", 'jobs_energy_joules_total{source="gpu"}'),
    "energy_other_joules": ("sum", 'jobs_energy_joules_total{source="other"}'),
}
# Series only cgroup v2 nodes have: their absence at the end is no sign of a stopped
# exporter (a v1 node never has them), so they never send a figure back to the window.
V2_ONLY_FIGURES = frozenset(
    {"cpu_pressure_seconds", "io_pressure_seconds", "memory_pressure_seconds",
     "memory_high_events"}
)
# Series only nodes with an energy source have (and the gpu/other parts only some of
# those): absent at the end for the same reason, so never sent back to the window.
ENERGY_FIGURES = frozenset({"energy_joules", "energy_gpu_joules", "energy_other_joules"})
# Likewise a series an exporter may rightly lack: I/O wait while kernel delay accounting
# is off. (CPU wait is exported on every layout: absent at the end, it is the exporter
# that stopped, and the window tells; an exporter older than it has none either way.)
MAYBE_ABSENT_FIGURES = V2_ONLY_FIGURES | {"io_wait_seconds"} | ENERGY_FIGURES
TAIL_TEMPLATE = "{agg} by ({node}) (last_over_time({metric}{{{sel}{extra}}}[{tail}]))"
# Gauges whose peak can be anywhere: scanned over the whole window, all in one request,
# as the largest of hour-long maxima (a subquery): the same samples, but Prometheus holds
# an hour of them at a time instead of the whole window (~20 % less of its CPU on a week).
# name -> (how series combine, metric), as in their WINDOW_QUERIES definitions.
WINDOW_PEAKS: dict[str, tuple[str, str]] = {
    "processes_max": ("max", "jobs_processes"),
    "threads_max": ("max", "jobs_threads"),
    "open_files_max": ("max", "jobs_open_files"),
    "open_files_limit_ratio_max": ("max", "jobs_open_files_limit_ratio"),
    "scratch_in_use": ("max", "jobs_scratch_in_use"),
    "busy_tasks_max": ("max", "jobs_busy_tasks"),
}
WINDOW_FIGURES = tuple(WINDOW_PEAKS)
PEAK_TEMPLATE = (
    "{agg}(max_over_time(max_over_time({metric}{{{sel}}}[{piece}s])[{window}s:{piece}s]))"
)
PIECE_SECONDS = 3600  # at least; grows past ~8 days so that at most 200 pieces are read

# Each allocated GPU's joules over the job (its NVML counter runs from the driver's load,
# so the increase, not the last value); few series, for the idle-GPU finding's figure.
# Each GPU's joules as the exporter attributed them to the job (the gpu series of
# jobs_energy_joules_total, per GPU): the same series, read the same way, as the job's
# "gpu" energy, so a card's figure and the job's GPU total never disagree.
GPU_ENERGY_QUERY = ('sum by ({node}, gpu) '
                    '(max_over_time(jobs_energy_joules_total{{{sel},source="gpu"}}[{span}]))')

# What each allocated GPU is: vendor, model, a MIG device's profile, its identity.
GPU_INFO_QUERY = ("max by ({node}, gpu, vendor, model, profile, uuid, pci_bus_id, power_share) "
                  "(last_over_time(jobs_gpu_info{{{sel}}}[{span}]))")

# Errors the job's GPUs reported over its run (exporter README "GPU faults"): XIDs by
# code, and memory errors by type (NVIDIA ECC, AMD RAS); only those that counted.
GPU_FAULT_QUERIES = {
    "xid": "sum by ({node}, gpu, xid) (increase(jobs_gpu_xid_errors_total{{{sel}}}[{span}])) > 0",
    "ecc": ("sum by ({node}, gpu, type) "
            "(increase(jobs_gpu_ecc_errors_total{{{sel}}}[{span}])) > 0"),
}
# Where some counted: the counters over the run, to date the first error of each.
GPU_FAULT_SERIES = ("max by ({node}, gpu, xid, type) "
                    "({{__name__=~\"jobs_gpu_xid_errors_total|jobs_gpu_ecc_errors_total\",{sel}}})")

# Readings a node's exporter played back instead of measuring (test and demo stacks):
# its replays while the job ran, on the job's nodes (those with the job's jobs_info; a
# replay series has no jobid). {scope}: the cluster's matchers in braces, or nothing.
# Only a replaying exporter has the series: elsewhere an empty, cheap answer.
REPLAY_QUERY = ("max by ({node}, source, recording) "
                "(max_over_time(jobs_exporter_replay_info{scope}[{span}])) "
                "and on ({node}) max by ({node}) (last_over_time(jobs_info{{{sel}}}[{span}]))")

FIGURE_LABEL = "figure"  # names each figure in a combined answer


def own_matchers(metric: str) -> tuple[str, str]:
    """A figure's metric and its own matchers, to follow the job's selector:

        'jobs_energy_joules_total{source="gpu"}' -> ('jobs_energy_joules_total', ',source="gpu"')
    """
    metric, _, extra = metric.partition("{")
    return metric, "," + extra.rstrip("}") if extra else ""


def tail_query(name: str, sel: str, node: str, tail: str) -> str:
    """One figure per node from the last samples before the job's end."""
    agg, metric = TAIL_FIGURES[name]
    metric, extra = own_matchers(metric)
    return TAIL_TEMPLATE.format(agg=agg, metric=metric, sel=sel, extra=extra, node=node,
                                tail=tail)


def peak_query(name: str, sel: str, first: float, at: float) -> tuple[str, float]:
    """(query, evaluation time) for the largest value of a WINDOW_FIGURES gauge in
    [first, at]: the max of aligned pieces covering it.

    A subquery ``[W:P]`` evaluated at T reads the pieces ending on multiples of P in
    (T - W, T], each covering the P seconds before it. Evaluated at T = ``at`` rounded up
    to a multiple of P with W = T - ``first``, they cover [first, at] and at most one
    piece more on each side, where the job has no samples.
    """
    agg, metric = WINDOW_PEAKS[name]
    piece = PIECE_SECONDS * max(1, math.ceil((at - first) / (200 * PIECE_SECONDS)))
    time = math.ceil(at / piece) * piece
    window = math.ceil(time - first)
    return PEAK_TEMPLATE.format(
        agg=agg, metric=metric, sel=sel, piece=piece, window=window
    ), float(time)


def combined(queries: dict[str, str]) -> str:
    """Several figures in one request: each query's answer labelled ``figure="<name>"``.

        {"read_bytes": "sum(...)", "threads_max": "max(...)"}
        -> label_replace(sum(...), "figure", "read_bytes", "", "") or label_replace(...)

    Figure names are identifiers (no quoting needed); ``or`` keeps every answer, their
    label sets differing by ``figure``.
    """
    return " or ".join(
        f'label_replace({query}, "{FIGURE_LABEL}", "{name}", "", "")'
        for name, query in queries.items()
    )
