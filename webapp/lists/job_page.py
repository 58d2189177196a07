"""A user's ended jobs as one page of list rows, sorted, filtered by state and cut by the
archive's database (``StaffRows.owner_page``): a user or an account with thousands of
jobs costs one indexed query per page, not a report per job; the staff pages' waste
tables and sums likewise (``archive_waste``).

The rows carry the report's own figures (``model.cpu_efficiency``, the stored peak,
``webapp.unused`` through ``JobRow``); the job's name and findings come from its
archived report when the sync archived one (one query for the page), else the row says
they are missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from webapp.archive.staff_rows import PAGE_SORTS, WASTE_SORTS, StaffRows
from webapp.archive.store import Archive
from webapp.json_codec import SECTIONS
from webapp.lists.job_list import ListQuery
from webapp.model import cpu_efficiency
from webapp.report.job_rows import JobRow, top_finding

PER_PAGE = 50
NOT_ARCHIVED = "name and findings: open the report"


def _utc(t: float | None) -> datetime | None:
    return datetime.fromtimestamp(t, UTC) if t else None


def row_of(r: Mapping[str, Any]) -> JobRow:
    """One archived row as a list row."""
    nodes = max(1, int(r["node_count"]))
    asked = r["memory_requested"]
    per_node = asked // nodes if asked else None
    peak, gpus, util = r["memory_peak"], int(r["gpus"]), r["gpu_utilization"]
    # the row's own efficiency (the judged node's, since migration 11), else the busiest
    # peak over the request per node: ``staff_rows.FIGURES["mem_eff"]``
    mem_eff = r.get("memory_efficiency")
    if mem_eff is None and peak is not None and per_node:
        mem_eff = peak / per_node
    return JobRow(
        r["cluster"], r["job_id"], "", r["user_name"], r["account"], r["state"],
        _utc(r["submit"]), _utc(r["end_at"]), r["elapsed"], r["cpus"], nodes, gpus, per_node,
        cpu_efficiency=cpu_efficiency(r["cpu_seconds"], r["elapsed"], r["cpus"]),
        memory_peak=peak, memory_efficiency=mem_eff, gpu_utilization=util if gpus else None,
        source="archive", missing=(NOT_ARCHIVED,), raw_id=r["raw_id"],
        cpu_seconds=r["cpu_seconds"], gpus_busy=None if util is None or not gpus else util * gpus,
        memory_requested=asked, memory_used=r.get("memory_used"))


def named(archive: Archive, found: list[dict[str, Any]]) -> list[JobRow]:
    """Archived rows as list rows, with the name and findings of each job's archived
    report (one query a cluster)."""
    keys: dict[str, list[tuple[str, int]]] = {}
    for r in found:
        keys.setdefault(r["cluster"], []).append((r["job_id"], r["submit_time"]))
    summaries = {(cluster, *key): summary for cluster, wanted in keys.items()
                 for key, summary in archive.summaries(cluster, wanted).items()}
    rows = []
    for r in found:
        row = row_of(r)
        summary = summaries.get((r["cluster"], r["job_id"], r["submit_time"]))
        if summary is not None:
            findings = SECTIONS["findings"][1](summary)  # as the archived report reads them
            row = replace(row, name=summary.get("job_name") or "", findings=len(findings),
                          top_finding=top_finding(findings), missing=())
        rows.append(row)
    return rows


def archive_page(archive: Archive, clusters: Sequence[str], name: str, q: ListQuery,
                 now: datetime, page: int = 1, per_page: int = PER_PAGE,
                 owner: str = "user") -> tuple[list[JobRow], int] | None:
    """Page ``page`` (from 1) of the jobs of ``owner`` ("user" or "account") ``name`` on
    ``clusters`` in the list's window and order, and how many there are; None when the
    database cannot sort that way (the list sorts)."""
    if q.sort not in PAGE_SORTS or q.name or q.findings_only:
        return None
    found, total = StaffRows(archive.db).owner_page(
        clusters, owner, name, q.since(now).timestamp(), now.timestamp(), q.sort,
        q.order == "desc", (max(1, page) - 1) * per_page, per_page, state=q.state or None)
    return named(archive, found), total


def archive_waste(archive: Archive, clusters: Sequence[str], name: str, q: ListQuery,
                  now: datetime, owner: str,
                  limit: int) -> tuple[dict[str, list[JobRow]], dict[str, float]]:
    """The ``limit`` archived jobs that left most of each kind of waste unused, and each
    kind's sum, over the window and state the list shows: ranked and summed by the
    database (``job_list.top_waste`` and ``job_list.totals`` on the archived rows)."""
    rows = StaffRows(archive.db)
    since, until, state = q.since(now).timestamp(), now.timestamp(), q.state or None
    found = {key: rows.owner_top_waste(clusters, owner, name, since, until, key, limit, state)
             for key in WASTE_SORTS}
    listed = iter(named(archive, [r for top in found.values() for r in top]))  # one lookup
    return ({key: [next(listed) for _ in top] for key, top in found.items()},
            rows.owner_waste_totals(clusters, owner, name, since, until, state))
