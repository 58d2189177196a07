"""The staff report's figures of each archived job, aggregated in the database.

One narrow row per ended job (``archive_staff_jobs``, migration 4): the columns of the
report's ``StaffJob``, written in bulk. A week of a large site (hundreds of thousands of
jobs) is ranked with GROUP BY and ORDER BY ... LIMIT here, so only a few thousand
per-user sums and a few rows per table ever reach Python. Rows are plain dicts keyed by
column name: the archive knows nothing of the report's classes.

Each job's derived figures (efficiency, and what was held and not used: ``webapp.unused``'s
formulas, the one SQL repeat of them) are written once, in ``FIGURES``, and every query
reads them by name from ``JOBS``, the table with those figures added: the per-user sums
and the job lists' sorts alike. ``tests/test_scale_small.py`` checks them against the
Python formulas on the same rows. The per-user sums and the energy per account come from
one grouped scan of the window (``window_totals``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobreport_common.units import GIB
from webapp.archive.db import Database

COLUMNS = ("cluster", "job_id", "submit_time", "end_time", "raw_id", "user_name", "account",
           "partition_name", "state", "submit", "start_time", "end_at", "elapsed",
           "time_limit", "cpus", "node_count", "nodes", "memory_requested", "gpus",
           "cpu_seconds", "memory_peak", "gpu_utilization", "gpu_memory_used",
           "gpu_memory_total", "node_cpu", "pending_reasons", "energy_joules", "memory_used",
           "memory_efficiency")
_SELECT = ", ".join(COLUMNS)

_HOURS = "(elapsed / 3600.0)"
_NODES = "(CASE WHEN node_count > 1 THEN node_count ELSE 1 END)"
_CPU_KNOWN = "elapsed > 0 AND cpus > 0 AND cpu_seconds IS NOT NULL"
_MEM_KNOWN = ("elapsed > 0 AND cpus > 0 AND memory_requested > 0"
              " AND memory_peak IS NOT NULL")
_MEM_USED = f"COALESCE(memory_used, memory_peak * {_NODES})"
# Per job, each figure once (NULL: not known). Waste is ``webapp.unused``'s: allocated x
# hours minus used, never below zero. Memory: requested GiB-hours minus the bytes used x
# hours, for jobs with a run time, CPUs, a request and a known peak; the bytes used are
# the row's ``memory_used`` (``unused.memory_used_bytes``, node by node, written with the
# row since migration 11), else the busiest node's peak x nodes; whether anything is
# left is decided on the bytes (exact, and the same answer as on the GiB-hours: both
# sides are scaled alike), so each side is computed once. Memory efficiency likewise:
# the row's own (the report's judged node), else the busiest peak over the request per
# node.
FIGURES = {
    # The efficiency table's sums: core-seconds of jobs with a CPU time, GPU-seconds,
    # those with a utilisation, and those times the utilisation.
    "core_seconds": "CASE WHEN cpu_seconds IS NOT NULL THEN elapsed * cpus END",
    "gpu_seconds": "elapsed * gpus",
    "gpu_seen_seconds": "CASE WHEN gpu_utilization IS NOT NULL THEN elapsed * gpus END",
    "gpu_used_seconds": "elapsed * gpus * gpu_utilization",
    # The job list's columns (``lists.job_list``).
    "cpu_eff": "CASE WHEN cpu_seconds = 0 AND elapsed > 0 THEN 0 WHEN cpu_seconds > 0"
               " AND elapsed > 0 AND cpus > 0 THEN cpu_seconds / (elapsed * cpus) END",
    "gpu_util": "CASE WHEN gpus > 0 THEN gpu_utilization END",
    # the peak over the request per node (``JobRow.memory_efficiency``)
    "mem_eff": "CASE WHEN memory_efficiency IS NOT NULL THEN memory_efficiency"
               " WHEN memory_peak IS NOT NULL AND memory_requested >= node_count"
               f" AND memory_requested > 0 THEN memory_peak * 1.0 / (memory_requested"
               f" / {_NODES}) END",
    "cpu_waste": f"CASE WHEN {_CPU_KNOWN} THEN (CASE WHEN elapsed * cpus > cpu_seconds"
                 " THEN (elapsed * cpus - cpu_seconds) / 3600.0 ELSE 0 END) END",
    # 0 without GPUs, as JobRow.gpu_hours_unused; unknown without a run or a mean use
    "gpu_waste": "CASE WHEN gpus = 0 THEN 0 WHEN elapsed > 0 AND cpus > 0 AND"
                 " gpu_utilization IS NOT NULL THEN (CASE WHEN gpu_utilization < 1 THEN"
                 f" gpus * (1 - gpu_utilization) * {_HOURS} ELSE 0 END) END",
    "mem_asked": f"CASE WHEN {_MEM_KNOWN} THEN memory_requested * 1.0 / {GIB} * {_HOURS} END",
    "mem_waste": f"CASE WHEN {_MEM_KNOWN} THEN (CASE WHEN memory_requested > {_MEM_USED}"
                 f" THEN memory_requested * 1.0 / {GIB} * {_HOURS} - {_MEM_USED}"
                 f" * 1.0 / {GIB} * {_HOURS} ELSE 0 END) END",
    # core-hours of time limit, and of it not used (0 without a limit)
    "time_asked": "time_limit * cpus / 3600.0",
    "time_waste": "CASE WHEN time_limit > elapsed THEN (time_limit - elapsed) * cpus / 3600.0"
                  " ELSE 0 END",
}
# The rows with their figures: what every query reads (a subquery the database merges
# into each query, so the window's index still finds the rows).
JOBS = (f"(SELECT *, {', '.join(f'{sql} AS {name}' for name, sql in FIGURES.items())}"  # noqa: S608
        " FROM archive_staff_jobs) AS jobs")

# Per user and account, over the window: the staff tables' sums (``USER_TOTAL_NAMES``).
_TOTALS = ("user_name", "account", "SUM(core_seconds)", "SUM(cpu_seconds)", "SUM(gpu_seconds)",
           "SUM(gpu_seen_seconds)", "SUM(gpu_used_seconds)", "SUM(mem_waste)",
           "SUM(mem_asked)", f"COUNT(CASE WHEN {_MEM_KNOWN} THEN 1 END)", "SUM(time_waste)",
           "SUM(time_asked)", "COUNT(time_limit)", "SUM(energy_joules)", "COUNT(energy_joules)")
USER_TOTAL_NAMES = ("user", "core_seconds", "cpu_seconds", "gpu_seconds", "gpu_seen_seconds",
                    "gpu_used_seconds", "memory_unused", "memory_requested", "memory_jobs",
                    "time_unused", "time_requested", "time_jobs", "energy_joules",
                    "energy_jobs")
# A user's job list sorted by the database: the list's sort keys (``lists.job_list``) as
# columns of ``JOBS``; NULL (unknown) sorts last either way, as the list does.
PAGE_SORTS = {"submit": "submit", "end": "end_at", "elapsed": "elapsed", "state": "state",
              **{k: k for k in ("cpu_eff", "gpu_util", "mem_eff", "cpu_waste", "mem_waste",
                                "gpu_waste")}}
WASTE_SORTS = ("cpu_waste", "gpu_waste", "mem_waste")  # lists.job_list.WASTE_KEYS
# Whose jobs a list shows: the page's kind -> its column.
OWNERS = {"user": "user_name", "account": "account"}


@dataclass(frozen=True)
class WindowTotals:
    """One grouped scan of a window: per user, the sums of ``USER_TOTAL_NAMES``; per
    account with energy figures, (account, joules, jobs)."""

    users: list[dict[str, Any]]
    account_energy: list[tuple[str, float, int]]


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

    def window_totals(self, w: Window) -> WindowTotals:
        """The per-user sums and the energy per account of the window's jobs, from one
        grouped scan (by user and account; Python adds up a user's accounts)."""
        rows = self.db.query(f"SELECT {', '.join(_TOTALS)} FROM {JOBS}"  # noqa: S608
                             f" WHERE {w.sql} GROUP BY user_name, account", w.params)
        users: dict[str, dict[str, Any]] = {}
        accounts: dict[str, list[float]] = {}
        for user, account, *sums in rows:
            # MariaDB sums BIGINT x 1.0 as DECIMAL: floats here, as SQLite gives them.
            got = dict(zip(USER_TOTAL_NAMES[1:], (float(v or 0) for v in sums), strict=True))
            mine = users.get(user)
            if mine is None:
                users[user] = {"user": user, **got}
            else:
                for k, v in got.items():
                    mine[k] += v
            if got["energy_jobs"]:
                energy = accounts.setdefault(account, [0.0, 0.0])
                energy[0] += got["energy_joules"]
                energy[1] += got["energy_jobs"]
        return WindowTotals(list(users.values()),
                            [(a, joules, int(n)) for a, (joules, n) in accounts.items()])

    def user_totals(self, w: Window) -> list[dict[str, Any]]:
        """One dict per user with jobs in the window (``USER_TOTAL_NAMES``)."""
        return self.window_totals(w).users

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
            f"SELECT {_SELECT} FROM {JOBS} WHERE {w}"  # noqa: S608
            f" ORDER BY {key} IS NULL, {key} {way}, job_id {way}"
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
        rows = self.db.query(
            f"SELECT {_SELECT} FROM {JOBS} WHERE {w} AND {key} > 0"  # noqa: S608
            f" ORDER BY {key} DESC, job_id LIMIT {int(limit)}", params)
        return [dict(zip(COLUMNS, r, strict=True)) for r in rows]

    def owner_waste_totals(self, clusters: Sequence[str], owner: str, name: str,
                           since: float, until: float,
                           state: str | None = None) -> dict[str, float]:
        """Each kind of waste (``WASTE_SORTS``) summed over the rows that have it
        (``job_list.totals``)."""
        w, params = self._owned(clusters, owner, name, since, until, state)
        sums = ", ".join(f"SUM({k})" for k in WASTE_SORTS)
        row = self.db.query(f"SELECT {sums} FROM {JOBS} WHERE {w}",  # noqa: S608
                            params)[0]
        # MariaDB sums BIGINT products as DECIMAL: floats here, as SQLite gives them.
        return {k: float(v or 0) for k, v in zip(WASTE_SORTS, row, strict=True)}
