"""Which enforcement policy `jobreport watch` cancels by, read at the start of each run:

- the ``[[cancel]]`` tables of the site policy (``JOBREPORT_POLICY_DIR``, the policy in
  force: reloaded on change or SIGHUP with the rest of it, scoped by its one rule);
- else, deprecated, the watch's own file ``JOBREPORT_WATCH_POLICY`` (policy.py), with a
  one-line warning; when the directory has ``[[cancel]]`` tables the file is ignored, and
  the log says so;
- else none: nothing is cancelled.

A policy directory that does not load (and never has in this process) cancels nothing:
the file is not fallen back on, as the directory may have meant otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from webapp.detectors.policy import Policy as SitePolicy
from webapp.detectors.policy_cancel import Enforced
from webapp.detectors.policy_in_force import in_force
from webapp.detectors.policy_scope import JobScope
from webapp.model import AccountingJob
from webapp.settings import Settings
from webapp.watch.policy import Policy as FilePolicy
from webapp.watch.policy import load_policy
from webapp.watch.rules import RULE_NAMES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Enforcement:
    """One of the two policies, and where it was read (for the log and `policy explain`)."""

    source: str
    site: SitePolicy | None = None
    file: FilePolicy | None = None

    def enforced(self, rule: str, job: JobScope) -> Enforced:
        if self.site is not None:
            return self.site.enforced(rule, job)
        entry = self.file.entry_for(rule, job) if self.file is not None else None
        if entry is None:
            return Enforced(rule, None)
        return Enforced(rule, entry.grace_seconds, (
            f"{self.source}: {entry.where}: {rule}: grace {entry.grace_seconds / 60:g} min",))


def watch_scope(job: AccountingJob) -> dict[str, str | None]:
    """A running job's scope, as ``job_scope`` gives a report's (the QoS from the view)."""
    return {"cluster": job.cluster, "partition": job.partition, "account": job.account,
            "qos": job.qos, "user": job.user}


def enforcement_in_force(settings: Settings) -> Enforcement | None:
    """The policy this run cancels by (None: none). Raises PolicyError when the policy
    directory has never loaded in this process, or the watch's file does not load."""
    site = in_force(settings.policy_dir).policy() if settings.policy_dir else None
    if site is not None and site.cancels:
        if settings.watch_policy:
            log.warning("JOBREPORT_WATCH_POLICY=%r ignored: the [[cancel]] tables of "
                        "JOBREPORT_POLICY_DIR=%r win", settings.watch_policy,
                        settings.policy_dir)
        return Enforcement(f"JOBREPORT_POLICY_DIR={settings.policy_dir!r} (policy version "
                           f"{site.version})", site=site)
    file = load_policy(settings.watch_policy, RULE_NAMES)
    if file is None:
        return None
    log.warning("JOBREPORT_WATCH_POLICY is deprecated: move its entries to [[cancel]] "
                "tables in JOBREPORT_POLICY_DIR (docs/policy.md)")
    return Enforcement(f"JOBREPORT_WATCH_POLICY={settings.watch_policy!r}", file=file)
