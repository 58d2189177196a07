"""The site policy's ``[[cancel]]`` tables: which running jobs `jobreport watch` may cancel,
by which of its rules, after what grace (docs/policy.md, "Enforcement").

A table is scoped as an ``[[override]]`` is (policy_scope.py, most specific wins) and,
like one, changes only what it names: ``grace_minutes`` switches cancelling on in its
scope (``enabled = true`` on again, ``false`` off), ``excluded_users`` and
``excluded_accounts`` switch it off for those. No ``rule``: every watch rule. Nothing is
cancelled unless a table says so.

The names of the watch's rules are kept here, below the watch (whose ``rules.py`` holds
the rules themselves; tests/test_watch_enforcement.py checks the two agree), so that
``jobreport policy check`` and every process that reads the policy judge a ``[[cancel]]``
table alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from webapp.detectors.policy_scope import SCOPES, JobScope, Scope, describe_scope, in_precedence

WATCH_RULES = ("gpu_idle", "node_idle", "memory_growth", "time_limit_no_output",
               "small_files_off_scratch")
CANCEL_KEYS = frozenset({*SCOPES, "rule", "enabled", "grace_minutes", "excluded_users",
                         "excluded_accounts"})


@dataclass(frozen=True)
class Cancel:
    where: str  # file:line
    scope: Scope
    rule: str | None = None  # None: every watch rule
    enabled: bool | None = None
    grace_seconds: float | None = None
    excluded_users: frozenset[str] = frozenset()
    excluded_accounts: frozenset[str] = frozenset()

    def describe(self) -> str:
        what = []
        if self.enabled is not None:
            what.append("on" if self.enabled else "off")
        if self.grace_seconds is not None:
            what.append(f"grace {self.grace_seconds / 60:g} min")
        if self.excluded_users:
            what.append("excluded users " + ", ".join(sorted(self.excluded_users)))
        if self.excluded_accounts:
            what.append("excluded accounts " + ", ".join(sorted(self.excluded_accounts)))
        return (f"{self.where}: {self.rule or 'every watch rule'} in "
                f"{describe_scope(self.scope)}: {'; '.join(what)}")


@dataclass(frozen=True)
class Enforced:
    """What the policy says about cancelling one job by one watch rule: the grace after
    its first notice (None: never cancelled) and the tables that said so, in order."""

    rule: str
    grace_seconds: float | None
    applied: tuple[str, ...] = ()


def enforced(cancels: Iterable[Cancel], rule: str, job: JobScope) -> Enforced:
    """The ``[[cancel]]`` tables for ``rule`` that hold ``job``, applied least specific
    first, as the overrides are (Policy.resolve)."""
    on, grace, applied = False, None, []
    for c in in_precedence((c for c in cancels if c.rule in (None, rule)), job):
        excluded = (job.get("user") in c.excluded_users
                    or job.get("account") in c.excluded_accounts)
        if c.grace_seconds is not None:
            grace, on = c.grace_seconds, True
        if c.enabled is not None:
            on = c.enabled
        if excluded:
            on = False
        applied.append(c.describe() + (" (this job is excluded)" if excluded else ""))
    return Enforced(rule, grace if on else None, tuple(applied))
