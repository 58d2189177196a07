"""The sync's state as Prometheus metrics, written for node_exporter's textfile collector
after each run (JOBREPORT_METRICS_TEXTFILE_DIR): one file per cluster, so the runs of
several clusters never overwrite each other's series. Alert on the watermark's age, the
last run's age, jobs failing and jobs given up."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from webapp.ops_metrics import textfile_path, write_textfile
from webapp.sync.status import StreamStatus

LABELS = ("cluster", "stream")


def registry_of(statuses: list[StreamStatus]) -> CollectorRegistry:
    registry = CollectorRegistry()

    def gauge(name: str, help: str, *extra: str) -> Gauge:
        return Gauge(name, help, [*LABELS, *extra], registry=registry)

    watermark = gauge("jobreport_sync_watermark_timestamp_seconds",
                      "End time of the last job the sync processed in order (Unix seconds);"
                      " every job that ended before it and reached slurmdbd is done.")
    last_run = gauge("jobreport_sync_last_run_timestamp_seconds",
                     "When the last sync run of this cluster and stream finished.")
    stopped = gauge("jobreport_sync_last_run_stopped",
                    "1 when the last run stopped early (a source unavailable, a stand-in"
                    " record): the next run starts there.")
    jobs = gauge("jobreport_sync_last_run_jobs",
                 "Jobs the last run processed, by outcome.", "outcome")
    failing = gauge("jobreport_sync_failing_jobs",
                    "Jobs the sync failed on and retries; the watermark waits for them.")
    given_up = gauge("jobreport_sync_given_up_jobs",
                     "Jobs given up on after their retries, still in the sync log"
                     " (`jobreport sync --jobid ID` tries one again).")
    for s in statuses:
        labels = (s.cluster, s.stream)
        if s.watermark is not None:
            watermark.labels(*labels).set(s.watermark)
        if s.last_run is not None:
            last_run.labels(*labels).set(s.last_run.finished_at)
            stopped.labels(*labels).set(1 if s.last_run.error else 0)
            for outcome, n in s.last_run.outcomes.items():
                jobs.labels(*labels, outcome).set(n)
        failing.labels(*labels).set(len(s.failing))
        given_up.labels(*labels).set(s.given_up)
    return registry


def write_metrics(directory: str, cluster: str, statuses: list[StreamStatus]) -> bool:
    """``jobreport_sync_<cluster>.prom`` in ``directory``; False when it could not be written."""
    return write_textfile(textfile_path(directory, f"jobreport_sync_{cluster}"),
                          registry_of(statuses))
