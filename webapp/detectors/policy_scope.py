"""The site policy's one scope rule (docs/policy.md, "Most specific wins"): what a table's
scope keys are, whether a job is in a scope, and in which order the tables matching a job
apply. The detectors' ``[[override]]``, the site's ``[[rule]]`` and the watch's
``[[cancel]]`` tables all go through it, so they cannot come to disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar

# Scope keys, least specific first: a table naming a later key wins over one naming only
# earlier keys (ties: the one naming more keys, then the later file and table).
SCOPES = ("cluster", "partition", "account", "qos", "user")

Scope = tuple[tuple[str, str], ...]
JobScope = Mapping[str, str | None]


class Scoped(Protocol):
    @property
    def scope(self) -> Scope: ...


S = TypeVar("S", bound=Scoped)


def matches(scope: Scope, job: JobScope) -> bool:
    """Whether the job is in the scope: every key the table names equals the job's."""
    return all(job.get(k) == v for k, v in scope)


def rank(scope: Scope) -> tuple[int, int]:
    keys = [SCOPES.index(k) for k, _ in scope]
    return (max(keys, default=-1), len(keys))


def in_precedence(tables: Iterable[S], job: JobScope) -> list[S]:
    """The tables whose scope holds the job, least specific first: applying each in turn,
    the most specific has the last word. Stable, so file order breaks ties."""
    return sorted((t for t in tables if matches(t.scope, job)), key=lambda t: rank(t.scope))


def describe_scope(scope: Scope) -> str:
    return ", ".join(f"{k} {v}" for k, v in scope) or "everywhere"


def parse_scope(table: Mapping[str, Any], where: str, problems: list[str],
                partitions: frozenset[str] | None) -> Scope:
    """A table's scope keys; a key that is not a name, or a partition the cluster does
    not have (when ``partitions`` is known), is a problem at ``where``."""
    scope = []
    for key in SCOPES:
        if key in table:
            value = table[key]
            if not isinstance(value, str) or not value:
                problems.append(f"{where}: {key} must be a name")
                continue
            if key == "partition" and partitions is not None and value not in partitions:
                problems.append(f"{where}: no partition {value!r} on this cluster")
            scope.append((key, value))
    return tuple(scope)
