"""The watch's own enforcement file, ``JOBREPORT_WATCH_POLICY`` (deprecated: the policy
directory's ``[[cancel]]`` tables replace it, and win when both exist; enforcement.py
picks). A job is cancelled only when one of its ``[[cancel]]`` entries names the rule and
the job's partition or account, and neither it nor the file's top level exempts the job's
user or account; the first such entry applies::

    exempt_accounts = ["admin"]          # never cancelled, whatever an entry says

    [[cancel]]
    rule = "gpu_idle"                    # a rule of `jobreport watch`
    partitions = ["gpu"]                 # jobs of these partitions ...
    accounts = ["physics"]               # ... or of these accounts
    grace_minutes = 60                   # after the first notice was delivered
    exempt_users = ["alice"]
    exempt_accounts = ["benchmarks"]
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webapp.detectors.policy_scope import JobScope

LISTS = ("partitions", "accounts", "exempt_users", "exempt_accounts")


class PolicyError(ValueError):
    """The policy file cannot be used; the message names the entry and key."""


@dataclass(frozen=True)
class CancelEntry:
    rule: str
    grace_seconds: float
    partitions: frozenset[str] = frozenset()
    accounts: frozenset[str] = frozenset()
    exempt_users: frozenset[str] = frozenset()
    exempt_accounts: frozenset[str] = frozenset()
    where: str = ""  # [[cancel]] #N

    def names(self, job: JobScope) -> bool:
        return job.get("partition") in self.partitions or job.get("account") in self.accounts

    def exempts(self, job: JobScope) -> bool:
        return job.get("user") in self.exempt_users or job.get("account") in self.exempt_accounts


@dataclass(frozen=True)
class Policy:
    entries: tuple[CancelEntry, ...] = ()
    exempt_users: frozenset[str] = frozenset()
    exempt_accounts: frozenset[str] = frozenset()

    def entry_for(self, rule: str, job: JobScope) -> CancelEntry | None:
        """The entry that lets ``rule`` cancel ``job``, or None (also when exempt)."""
        if job.get("user") in self.exempt_users or job.get("account") in self.exempt_accounts:
            return None
        for entry in self.entries:
            if entry.rule == rule and entry.names(job) and not entry.exempts(job):
                return entry
        return None


def _names(table: dict[str, Any], key: str, where: str) -> frozenset[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{where}: {key} must be a list of names")
    return frozenset(value)


def parse_policy(text: str, rules: tuple[str, ...]) -> Policy:
    """The policy in ``text``; PolicyError on an unknown rule or key, or an entry that
    names no partition and no account (nothing is cancelled by default)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"not TOML: {exc}") from None
    unknown = sorted(set(data) - {"cancel", "exempt_users", "exempt_accounts"})
    if unknown:
        raise PolicyError(f"unknown key(s) {', '.join(unknown)}")
    tables = data.get("cancel", [])
    if not isinstance(tables, list):  # `cancel = 3`, or one [cancel] table for [[cancel]]
        raise PolicyError("cancel must be [[cancel]] tables, one per entry")
    entries = []
    for i, table in enumerate(tables):
        where = f"[[cancel]] #{i + 1}"
        if not isinstance(table, dict):
            raise PolicyError(f"{where}: not a table")
        extra = sorted(set(table) - {"rule", "grace_minutes", *LISTS})
        if extra:
            raise PolicyError(f"{where}: unknown key(s) {', '.join(extra)}")
        rule = table.get("rule")
        if rule not in rules:
            raise PolicyError(f"{where}: rule {rule!r} is not one of {', '.join(rules)}")
        grace = table.get("grace_minutes")
        if not isinstance(grace, int | float) or grace < 0:
            raise PolicyError(f"{where}: grace_minutes must be a number >= 0")
        entry = CancelEntry(rule, float(grace) * 60, **{k: _names(table, k, where) for k in LISTS},
                            where=where)
        if not entry.partitions and not entry.accounts:
            raise PolicyError(f"{where}: name at least one partition or account")
        entries.append(entry)
    return Policy(tuple(entries), _names(data, "exempt_users", "policy"),
                  _names(data, "exempt_accounts", "policy"))


def load_policy(path: str, rules: tuple[str, ...]) -> Policy | None:
    """None when no policy is configured: enforcement is off. Errors name the setting."""
    if not path:
        return None
    where = f"JOBREPORT_WATCH_POLICY={path!r}"
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PolicyError(f"{where}: {exc.strerror}") from None
    try:
        return parse_policy(text, rules)
    except PolicyError as exc:
        raise PolicyError(f"{where}: {exc}") from None
