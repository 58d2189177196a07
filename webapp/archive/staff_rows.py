"""The staff report's figures of each archived job, aggregated in the database.

One narrow row per ended job (``archive_staff_jobs``, migration 4): the columns of the
report's ``StaffJob``, written in bulk. A week of a large site (hundreds of thousands of
jobs) is ranked with GROUP BY and ORDER BY ... LIMIT here, so only a few thousand
per-user sums and a few rows per table ever reach Python. Rows are plain dicts keyed by
column name: the archive knows nothing of the report's classes.

The one SQL repeat of ``webapp.unused`` (memory held idle) is checked against the Python
formula on the same rows by ``tests/test_scale_small.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webapp.archive.db import Database
from webapp.formatting import GIB

COLUMNS = ("cluster", "job_id", "submit_time", "end_time", "raw_id", "user_name", "account",
           "partition_name", "state", "submit", "start_time", "end_at", "elapsed",
           "time_limit", "cpus", "node_count", "nodes", "memory_requested", "gpus",
           "cpu_seconds", "memory_peak", "gpu_utilization", "gpu_memory_used",
           "gpu_memory_total", "node_cpu", "pending_reasons", "energy_joules")
_SELECT = ", ".join(COLUMNS)

# Per user, over the window: the staff tables' sums. Memory: ``webapp.unused``'s formula,
# requested GiB-hours minus the busiest node's peak x nodes x hours, never below zero,
# for jobs with a run time, CPUs, a request and a known peak.
_HOURS = "(elapsed / 3600.0)"
_MEM_ASKED = f"(memory_requested * 1.0 / {GIB} * {_HOURS})"
_MEM_USED = (f"(memory_peak * (CASE WHEN node_count > 1 THEN node_count ELSE 1 END) * 1.0"
             f" / {GIB} * {_HOURS})")
_MEM_KNOWN = ("elapsed > 0 AND cpus > 0 AND memory_requested > 0"
              " AND memory_peak IS NOT NULL")
_GPU_SEEN = "gpus > 0 AND gpu_utilization IS NOT NULL"
USER_TOTALS = (
    "user_name",
    "SUM(CASE WHEN cpu_seconds IS NOT NULL THEN elapsed * cpus ELSE 0 END)",  # core-seconds
    "SUM(COALESCE(cpu_seconds, 0))",
    "SUM(elapsed * gpus)",
    f"SUM(CASE WHEN {_GPU_SEEN} THEN elapsed * gpus ELSE 0 END)",
    f"SUM(CASE WHEN {_GPU_SEEN} THEN elapsed * gpus * gpu_utilization ELSE 0 END)",
    f"SUM(CASE WHEN {_MEM_KNOWN} THEN (CASE WHEN {_MEM_ASKED} > {_MEM_USED}"
    f" THEN {_MEM_ASKED} - {_MEM_USED} ELSE 0 END) ELSE 0 END)",
    f"SUM(CASE WHEN {_MEM_KNOWN} THEN {_MEM_ASKED} ELSE 0 END)",
    f"COUNT(CASE WHEN {_MEM_KNOWN} THEN 1 END)",
    "SUM(CASE WHEN time_limit IS NOT NULL AND time_limit > elapsed"
    " THEN (time_limit - elapsed) * cpus / 3600.0 ELSE 0 END)",
    "SUM(CASE WHEN time_limit IS NOT NULL THEN time_limit * cpus / 3600.0 ELSE 0 END)",
    "COUNT(time_limit)",
    # the energy table by user, from the same scan (a GROUP BY of its own cost 0.36 s of
    # the report's 2.9 s at 700,000 jobs)
    "SUM(energy_joules)",
    "COUNT(energy_joules)",
)
USER_TOTAL_NAMES = ("user", "core_seconds", "cpu_seconds", "gpu_seconds", "gpu_seen_seconds",
                    "gpu_used_seconds", "memory_unused", "memory_requested", "memory_jobs",
                    "time_unused", "time_requested", "time_jobs", "energy_joules",
                    "energy_jobs")
# A user's job list sorted by the database: the list's sort keys (``lists.job_list``)
# as expressions; NULL (unknown) sorts last either way, as the list does.
_CPU_KNOWN = "elapsed > 0 AND cpus > 0 AND cpu_seconds IS NOT NULL"
PAGE_SORTS = {
    "submit": "submit",
    "end": "end_at",
    "elapsed": "elapsed",
    "state": "state",
    "cpu_eff": "CASE WHEN cpu_seconds = 0 AND elapsed > 0 THEN 0 WHEN cpu_seconds > 0"
               " AND elapsed > 0 AND cpus > 0 THEN cpu_seconds / (elapsed * cpus) END",
    "gpu_util": "CASE WHEN gpus > 0 THEN gpu_utilization END",
    # the peak over the request per node (``JobRow.memory_efficiency``)
    "mem_eff": "CASE WHEN memory_peak IS NOT NULL AND memory_requested >= node_count"
               " AND memory_requested > 0 THEN memory_peak * 1.0 / (memory_requested"
               " / (CASE WHEN node_count > 1 THEN node_count ELSE 1 END)) END",
    "cpu_waste": f"CASE WHEN {_CPU_KNOWN} THEN (CASE WHEN elapsed * cpus > cpu_seconds"
                 " THEN (elapsed * cpus - cpu_seconds) / 3600.0 ELSE 0 END) END",
    "mem_waste": f"CASE WHEN {_MEM_KNOWN} THEN (CASE WHEN {_MEM_ASKED} > {_MEM_USED}"
                 f" THEN {_MEM_ASKED} - {_MEM_USED} ELSE 0 END) END",
    # 0 without GPUs, as JobRow.gpu_hours_unused; unknown without a run or a mean use
    "gpu_waste": "CASE WHEN gpus = 0 THEN 0 WHEN elapsed > 0 AND cpus > 0 AND"
                 " gpu_utilization IS NOT NULL THEN (CASE WHEN gpu_utilization < 1 THEN"
                 f" gpus * (1 - gpu_utilization) * {_HOURS} ELSE 0 END) END",
}
WASTE_SORTS = ("cpu_waste", "gpu_waste", "mem_waste")  # lists.job_list.WASTE_KEYS
# Whose jobs a list shows: the page's kind -> its column.
OWNERS = {"user": "user_name", "account": "account"}

class Window:
    """The WHERE clause of one report window: a cluster's jobs that ended in
    [since, until], optionally only some partitions."""

    def __init__(self, cluster: str, since: float, until: float,
                 partitions: Sequence[str] = ()) -> None:
        self.sql = "cluster = ? AND end_time >= ? AND end_time <= ?"
        self.params: list[Any] = [cluster, int(since), int(until)]
        if partitions:
            self.sql += f" AND partition_name IN ({', '.join('?' for _ in partitions)})"
            self.params += list(partitions)


class StaffRows:
    """``archive_staff_jobs`` of an open archive database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Insert rows (dicts with every column), keeping any already there."""
        values = [tuple(r[c] for c in COLUMNS) for r in rows]
        if values:
            self.db.execute_many(
                f"{self.db.dialect.insert_ignore} INTO archive_staff_jobs ({_SELECT})"
                f" VALUES ({', '.join('?' for _ in COLUMNS)})", values)

    def replace(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Write rows over any of the same key (a job archived again by hand)."""
        rows = list(rows)
        with self.db.transaction():
            for r in rows:
                self.db.execute("DELETE FROM archive_staff_jobs WHERE cluster = ? AND"
                                " job_id = ? AND submit_time = ?",
                                (r["cluster"], r["job_id"], r["submit_time"]))
            self.put(rows)

    def count(self, w: Window) -> int:
        return self._count(w.sql, w.params)

    def user_totals(self, w: Window) -> list[dict[str, Any]]:
        """One dict per user with jobs in the window (``USER_TOTAL_NAMES``)."""
        rows = self.db.query(f"SELECT {', '.join(USER_TOTALS)} FROM archive_staff_jobs"  # noqa: S608
                             f" WHERE {w.sql} GROUP BY user_name", w.params)
        # MariaDB sums BIGINT x 1.0 as DECIMAL: floats here, as SQLite gives them.
        return [{"user": r[0], **{k: float(v or 0) for k, v in
                                  zip(USER_TOTAL_NAMES[1:], r[1:], strict=True)}}
                for r in rows]

    def energy_totals(self, w: Window, key: str) -> list[tuple[str, float, int]]:
        """(account or user, joules, jobs) over the window's jobs with an energy figure;
        ``key`` is "account" or "user"."""
        column = {"account": "account", "user": "user_name"}[key]
        rows = self.db.query(f"SELECT {column}, SUM(energy_joules), COUNT(energy_joules)"  # noqa: S608
                             f" FROM archive_staff_jobs WHERE {w.sql} AND energy_joules"
                             f" IS NOT NULL GROUP BY {column}", w.params)
        return [(r[0], float(r[1]), int(r[2])) for r in rows]

    def top(self, w: Window, where: str, params: Sequence[Any], order: str | None,
            limit: int | None) -> list[dict[str, Any]]:
        """Rows of the window matching ``where`` (fixed SQL from the report's tables),
        largest ``order`` first, then by job id; every match when ``limit`` is None."""
        sql = f"SELECT {_SELECT} FROM archive_staff_jobs WHERE {w.sql} AND ({where})"  # noqa: S608
        if order is not None:
            sql += f" ORDER BY {order} DESC, job_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [dict(zip(COLUMNS, r, strict=True))
                for r in self.db.query(sql, [*w.params, *params])]

    def archived(self, cluster: str, job_ids: Sequence[str]) -> set[str]:
        """The ids among ``job_ids`` that have a row (what a list need not show twice)."""
        return {r[0] for r in self.db.query_in(
            "SELECT job_id FROM archive_staff_jobs WHERE cluster = ? AND job_id IN ({})",
            [cluster], list(dict.fromkeys(job_ids)))}

    def _owned(self, clusters: Sequence[str], owner: str, name: str, since: float,
               until: float, state: str | None) -> tuple[str, list[Any]]:
        """The WHERE clause of one user's or account's jobs that ended in [since, until]
        on ``clusters`` (one, or every cluster one archive holds)."""
        if isinstance(clusters, str) or not clusters:
            raise ValueError(f"clusters must be a non-empty list, not {clusters!r}")
        on = "cluster = ?" if len(clusters) == 1 else \
            f"cluster IN ({', '.join('?' for _ in clusters)})"
        w = f"{on} AND {OWNERS[owner]} = ? AND end_time >= ? AND end_time <= ?"
        params: list[Any] = [*clusters, name, int(since), int(until)]
        if state is not None:
            w += " AND state = ?"
            params.append(state)
        return w, params

    def owner_count(self, clusters: Sequence[str], owner: str, name: str, since: float,
                    until: float) -> int:
        """How many rows of ``owner`` ("user" or "account") ``name`` ended in [since, until]."""
        return self._count(*self._owned(clusters, owner, name, since, until, None))

    def _count(self, where: str, params: Sequence[Any]) -> int:
        return int(self.db.query(f"SELECT COUNT(*) FROM archive_staff_jobs WHERE {where}",  # noqa: S608
                                 params)[0][0])

    def owner_page(self, clusters: Sequence[str], owner: str, name: str, since: float,
                   until: float,
                   sort: str = "submit", descending: bool = True, offset: int = 0,
                   limit: int = 50, state: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """One page of a user's or an account's jobs that ended in [since, until], sorted
        and cut by the database; (rows, how many in all). KeyError for a sort not in
        ``PAGE_SORTS`` or an owner not in ``OWNERS``."""
        w, params = self._owned(clusters, owner, name, since, until, state)
        total = self._count(w, params)
        way, key = "DESC" if descending else "ASC", PAGE_SORTS[sort]
        rows = self.db.query(
            f"SELECT {_SELECT} FROM archive_staff_jobs WHERE {w}"  # noqa: S608
            f" ORDER BY ({key}) IS NULL, {key} {way}, job_id {way}"
            f" LIMIT {int(limit)} OFFSET {int(offset)}", params)
        return [dict(zip(COLUMNS, r, strict=True)) for r in rows], total

    def owner_top_waste(self, clusters: Sequence[str], owner: str, name: str, since: float,
                        until: float, key: str, limit: int,
                        state: str | None = None) -> list[dict[str, Any]]:
        """The ``limit`` rows that left most of ``key`` (``WASTE_SORTS``) unused, more
        than none, largest first and then by job id (``job_list.top_waste``'s order)."""
        if key not in WASTE_SORTS:
            raise KeyError(key)
        w, params = self._owned(clusters, owner, name, since, until, state)
        expr = PAGE_SORTS[key]
        rows = self.db.query(
            f"SELECT {_SELECT} FROM archive_staff_jobs WHERE {w} AND ({expr}) > 0"  # noqa: S608
            f" ORDER BY {expr} DESC, job_id LIMIT {int(limit)}", params)
        return [dict(zip(COLUMNS, r, strict=True)) for r in rows]

    def owner_waste_totals(self, clusters: Sequence[str], owner: str, name: str,
                           since: float, until: float,
                           state: str | None = None) -> dict[str, float]:
        """Each kind of waste (``WASTE_SORTS``) summed over the rows that have it
        (``job_list.totals``)."""
        w, params = self._owned(clusters, owner, name, since, until, state)
        sums = ", ".join(f"SUM({PAGE_SORTS[k]})" for k in WASTE_SORTS)
        row = self.db.query(f"SELECT {sums} FROM archive_staff_jobs WHERE {w}",  # noqa: S608
                            params)[0]
        # MariaDB sums BIGINT products as DECIMAL: floats here, as SQLite gives them.
        return {k: float(v or 0) for k, v in zip(WASTE_SORTS, row, strict=True)}
