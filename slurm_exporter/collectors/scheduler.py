"""The scheduler's own health (sdiag): cycle times, backfill depth, queue length, RPCs.

sdiag's counters restart at midnight and when slurmctld restarts; they are exported as
counters all the same, since rate() handles resets.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from slurm_exporter.families import counter, gauge
from slurm_exporter.sdiag import SdiagStats

US = 1e-6  # sdiag prints cycle times in microseconds

# (section, sdiag key) -> (metric, help, scale)
GAUGES = (
    (("general", "Server thread count"), "slurm_scheduler_threads",
     "slurmctld server threads in use.", 1),
    (("general", "Agent queue size"), "slurm_scheduler_agent_queue_size",
     "Outgoing RPCs queued by slurmctld's agent.", 1),
    (("general", "DBD Agent queue size"), "slurm_scheduler_dbd_agent_queue_size",
     "Messages queued for slurmdbd (grows when slurmdbd is down).", 1),
    (("general", "Jobs pending"), "slurm_scheduler_jobs_pending",
     "Pending jobs at sdiag's last job-state sample.", 1),
    (("general", "Jobs running"), "slurm_scheduler_jobs_running",
     "Running jobs at sdiag's last job-state sample.", 1),
    (("main", "Last cycle"), "slurm_scheduler_last_cycle_seconds",
     "Duration of the main scheduler's last cycle, in seconds.", US),
    (("main", "Max cycle"), "slurm_scheduler_max_cycle_seconds",
     "Longest main scheduler cycle since the statistics were reset, in seconds.", US),
    (("main", "Mean cycle"), "slurm_scheduler_mean_cycle_seconds",
     "Mean main scheduler cycle, in seconds.", US),
    (("main", "Mean depth cycle"), "slurm_scheduler_mean_depth",
     "Mean number of jobs the main scheduler looked at per cycle.", 1),
    (("main", "Last queue length"), "slurm_scheduler_queue_length",
     "Jobs in the main scheduler's queue at its last cycle.", 1),
    (("backfill", "Last cycle"), "slurm_backfill_last_cycle_seconds",
     "Duration of the backfill scheduler's last cycle, in seconds.", US),
    (("backfill", "Max cycle"), "slurm_backfill_max_cycle_seconds",
     "Longest backfill cycle since the statistics were reset, in seconds.", US),
    (("backfill", "Mean cycle"), "slurm_backfill_mean_cycle_seconds",
     "Mean backfill cycle, in seconds.", US),
    (("backfill", "Last depth cycle"), "slurm_backfill_last_depth",
     "Jobs the backfill scheduler looked at in its last cycle.", 1),
    (("backfill", "Last depth cycle (try sched)"), "slurm_backfill_last_depth_try_sched",
     "Jobs the backfill scheduler tried to start in its last cycle.", 1),
    (("backfill", "Last queue length"), "slurm_backfill_queue_length",
     "Jobs in the backfill queue at its last cycle.", 1),
    (("backfill", "Last table size"), "slurm_backfill_table_size",
     "Time slots in the backfill table at its last cycle.", 1),
)
COUNTERS = (
    (("general", "Jobs submitted"), "slurm_scheduler_jobs_submitted", "Jobs submitted."),
    (("general", "Jobs started"), "slurm_scheduler_jobs_started", "Jobs started."),
    (("general", "Jobs completed"), "slurm_scheduler_jobs_completed", "Jobs completed."),
    (("general", "Jobs canceled"), "slurm_scheduler_jobs_canceled", "Jobs cancelled."),
    (("general", "Jobs failed"), "slurm_scheduler_jobs_failed", "Jobs failed."),
    (("main", "Total cycles"), "slurm_scheduler_cycles", "Main scheduler cycles."),
    (("backfill", "Total cycles"), "slurm_backfill_cycles", "Backfill scheduler cycles."),
    (("backfill", "Total backfilled jobs (since last slurm start)"), "slurm_backfill_jobs",
     "Jobs started by the backfill scheduler since slurmctld started."),
)


class SchedulerCollector:
    name = "scheduler"
    source = "sdiag"

    def collect(self, cluster: str, stats: SdiagStats) -> Iterator[Metric]:
        for key, name, doc, scale in GAUGES:
            if key in stats.values:
                family = gauge(name, doc)
                family.add_metric([cluster], stats.values[key] * scale)
                yield family
        for key, name, doc in COUNTERS:
            if key in stats.values:
                total = counter(name, doc + " Reset by sdiag at midnight.")
                total.add_metric([cluster], stats.values[key])
                yield total
        for rpcs, label, what in ((stats.rpc_by_type, "rpc", "message type"),
                                  (stats.rpc_by_user, "user", "user")):
            prefix = "slurm_rpc" if label == "rpc" else "slurm_rpc_user"
            calls = counter(f"{prefix}_calls", f"RPCs slurmctld handled, per {what}.",
                            [label])
            seconds = counter(f"{prefix}_duration_seconds",
                              f"Time slurmctld spent in RPCs, per {what}, in seconds.", [label])
            for rpc in rpcs:
                calls.add_metric([cluster, rpc.name], rpc.count)
                seconds.add_metric([cluster, rpc.name], rpc.total_time_seconds)
            yield calls
            yield seconds
