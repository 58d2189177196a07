"""Enforcement: cancel a job the policy names, once its first notice was delivered and
the grace period has passed while the condition still holds. Every cancellation is
recorded (who, which rule, the evidence), logged and emailed to the owner."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from webapp.formatting import format_duration
from webapp.mail.outbox import Outbox
from webapp.watch.enforcement import Enforcement, watch_scope
from webapp.watch.rules import Alert
from webapp.watch_records import AlertLog, Cancellation

log = logging.getLogger(__name__)

# scancel's argv -> None when done, else the error text
Canceller = Callable[[list[str]], str | None]


def run_scancel(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if proc.returncode:
        lines = (proc.stderr or "").strip().splitlines()
        return f"exit status {proc.returncode}: {lines[-1] if lines else 'no message'}"
    return None


@dataclass(frozen=True)
class Decision:
    """What enforcement does about one alert: ``cancelled``, ``would cancel``,
    ``in grace until <time>``, ``waiting for the first notice``, or ``failed: ...``."""

    alert: Alert
    outcome: str
    grace_seconds: float


def alert_key(cluster: str, alert: Alert) -> str:
    job = alert.job
    submit = int(job.submit_time.timestamp()) if job.submit_time else 0
    return f"watch:{cluster}:{job.job_id}:{submit}:{alert.rule}"


def cancel_key(cluster: str, alert: Alert) -> str:
    return "cancel:" + alert_key(cluster, alert).partition(":")[2]


def decide(alert: Alert, policy: Enforcement, outbox: Outbox, log_: AlertLog, cluster: str,
           now: float, *, scancel: str, canceller: Canceller, dry_run: bool) -> Decision | None:
    """None when the policy does not name this job for this rule (or it is exempt)."""
    grace = policy.enforced(alert.rule, watch_scope(alert.job)).grace_seconds
    if grace is None:
        return None
    notice = outbox.get(alert_key(cluster, alert))
    if notice is None or notice.status != "sent" or notice.sent_at is None:
        return Decision(alert, "waiting for the first notice", grace)
    if now - notice.sent_at < grace:
        return Decision(alert, f"in grace for {format_duration(grace - (now - notice.sent_at))}",
                        grace)
    if log_.cancelled(cancel_key(cluster, alert)):
        return Decision(alert, "cancelled before", grace)
    if dry_run:
        return Decision(alert, "would cancel", grace)
    job = alert.job
    error = canceller([scancel, job.job_id])
    outcome = "cancelled" if error is None else f"failed: {error}"
    log.warning("watch: job %s of %s (account %s, partition %s) %s by rule %s; evidence: %s",
                job.job_id, job.user, job.account, job.partition, outcome, alert.rule,
                "; ".join(f"{k} {v}" for k, v in alert.evidence))
    log_.record_cancellation(cancel_key(cluster, alert), cluster, Cancellation(
        job.user or "", job.account or "", job.partition or "", job.job_id, alert.rule,
        alert.evidence, outcome, now))
    return Decision(alert, outcome, grace)
