"""Job lists: which of a user's (or an account's) job rows a page shows, in which order,
and the jobs that left most unused. The rows, and the figures they carry, are the report's
(``webapp.report.job_rows``); a page's parameters are checked by the web app
(``webapp.web.query_params.list_query``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from webapp.report.job_rows import JobRow
from webapp.states import LIST_STATES

DEFAULT_DAYS = 7
MAX_DAYS = 90  # a bounded window: the queries grow with it
MAX_NAME = 200
MAX_PAGE = 100_000  # pages of a database-paged list (50 rows each): bounded, like days
STATES = LIST_STATES


# Sort keys of the tables: parameter -> the row's value (None sorts last either way).
# The waste figures (hours, GiB-hours; None when unknown): what top_waste ranks and totals adds.
WASTE: dict[str, Callable[[JobRow], float | None]] = {
    "cpu_waste": lambda r: r.cpu_hours_unused,
    "gpu_waste": lambda r: r.gpu_hours_unused,
    "mem_waste": lambda r: r.memory_gib_hours_unused,
}
SORT_KEYS: dict[str, Callable[[JobRow], object]] = {
    "job": lambda r: (r.cluster, int(re.split(r"[_+]", r.job_id)[0]), r.job_id),
    "name": lambda r: r.name.lower(),
    "user": lambda r: r.user,
    "state": lambda r: r.state,
    "submit": lambda r: r.submit,
    "elapsed": lambda r: r.elapsed,
    "cpu_eff": lambda r: r.cpu_efficiency,
    "mem_eff": lambda r: r.memory_efficiency,
    "gpu_util": lambda r: r.gpu_utilization,
    "findings": lambda r: r.findings,
    **WASTE,
}
WASTE_KEYS = tuple(WASTE)


@dataclass(frozen=True)
class ListQuery:
    """A job list's validated parameters: ``?days=7&state=FAILED&name=train&findings=1
    &sort=cpu_eff&order=asc&page=2`` (``page``: lists the database pages; the web app's
    ``query_params.list_query`` checks them)."""

    days: int = DEFAULT_DAYS
    state: str = ""
    name: str = ""
    findings_only: bool = False
    sort: str = "submit"
    order: str = "desc"
    cluster: str = ""  # one of several clusters, "" for all
    page: int = 1

    def args(self, **changes: Any) -> dict[str, str]:  # field -> its new value
        """The query string of this list with ``changes`` (for links), defaults left out."""
        q = replace(self, **changes)
        out = {"days": str(q.days) if q.days != DEFAULT_DAYS else "", "state": q.state,
               "name": q.name, "findings": "1" if q.findings_only else "",
               "sort": q.sort, "order": q.order, "cluster": q.cluster,
               "page": str(q.page) if q.page != 1 else ""}
        return {k: v for k, v in out.items() if v}

    def sort_link(self, key: str) -> dict[str, str]:
        """The column header's link: this column, the other order when it is the current;
        back to the first page (another order is another list)."""
        if key == self.sort:
            return self.args(order="asc" if self.order == "desc" else "desc", page=1)
        return self.args(sort=key, order="asc" if key in ("job", "name", "user") else "desc",
                         page=1)

    def since(self, now: datetime) -> datetime:
        return now - timedelta(days=self.days)


def select(rows: Iterable[JobRow], q: ListQuery) -> list[JobRow]:
    """The rows the filters keep, in the asked order (unknown values last either way)."""
    kept = [r for r in rows
            if (not q.state or r.state == q.state)
            and (not q.name or q.name.lower() in r.name.lower())
            and (not q.findings_only or (r.findings or 0) > 0)
            and (not q.cluster or r.cluster == q.cluster)]
    key = SORT_KEYS[q.sort]
    known = [r for r in kept if key(r) is not None]
    unknown = [r for r in kept if key(r) is None]
    known.sort(key=lambda r: (key(r), r.job_id), reverse=q.order == "desc")
    return known + unknown


def top_waste(rows: Iterable[JobRow], key: str, n: int = 10) -> list[JobRow]:
    """The ``n`` jobs that left most of ``key`` (cpu_waste, gpu_waste, mem_waste) unused."""
    value = WASTE[key]
    ranked = [r for r in rows if (value(r) or 0) > 0]
    ranked.sort(key=lambda r: (-float(value(r) or 0.0), r.job_id))
    return ranked[:n]


def totals(rows: Iterable[JobRow]) -> dict[str, float]:
    """Sum of each kind of waste over the rows that have it."""
    out = dict.fromkeys(WASTE_KEYS, 0.0)
    for r in rows:
        for k in WASTE_KEYS:
            out[k] += float(WASTE[k](r) or 0.0)
    return out
