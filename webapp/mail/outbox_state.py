"""The outbox's state as staff read it (`jobreport outbox --status`) and as Prometheus
metrics for alerting (node_exporter's textfile collector): rows per status, the oldest
message not sent yet, the messages given up, and the newest error of any row.

Pure: ``Outbox.state()`` reads it (from indexes: a scan of the table would read every
message), this module shapes it. Emails and chat notices share the table and are counted
together; a row's ``kind`` says which it is."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from prometheus_client import CollectorRegistry, Gauge

from webapp.json_codec import Json

STATUSES = ("pending", "sending", "sent", "failed")
TEXTFILE = "jobreport_outbox"  # <JOBREPORT_METRICS_TEXTFILE_DIR>/jobreport_outbox.prom


@dataclass(frozen=True)
class Problem:
    """One row's last error: a row given up, or the newest error of any row."""

    id: int
    key: str
    kind: str
    to_addr: str
    status: str
    attempts: int
    error: str
    at: float | None  # when (None: it failed under a release that did not keep the time)


@dataclass(frozen=True)
class OutboxState:
    now: float
    counts: dict[str, int]  # status -> rows
    oldest_unsent: float | None  # created_at of the oldest pending or sending row
    given_up: tuple[Problem, ...]  # status 'failed', oldest first
    last_error: Problem | None  # the newest error of any row, sent ones included

    @property
    def oldest_unsent_age(self) -> float | None:
        return None if self.oldest_unsent is None else max(0.0, self.now - self.oldest_unsent)

    def as_dict(self) -> Json:
        """The JSON of `jobreport outbox --status --format json`."""
        return {
            "now": self.now,
            "counts": self.counts,
            "oldest_unsent_age_seconds": self.oldest_unsent_age,
            "given_up": [asdict(p) for p in self.given_up],
            "last_error": asdict(self.last_error) if self.last_error else None,
        }


def registry(state: OutboxState) -> CollectorRegistry:
    """The state as metrics, in a registry of its own (one writer, one textfile)."""
    reg = CollectorRegistry()
    messages = Gauge("jobreport_outbox_messages",
                     "Messages (emails and chat notices) in the outbox by status.",
                     ["status"], registry=reg)
    for status in STATUSES:
        messages.labels(status).set(state.counts.get(status, 0))
    Gauge("jobreport_outbox_oldest_unsent_age_seconds",
          "Age of the oldest message not sent yet (pending or sending); 0 when none.",
          registry=reg).set(state.oldest_unsent_age or 0.0)
    Gauge("jobreport_outbox_last_error_timestamp_seconds",
          "Unix time of the newest delivery error of any message; 0 when none.",
          registry=reg).set((state.last_error.at or 0.0) if state.last_error else 0.0)
    return reg
