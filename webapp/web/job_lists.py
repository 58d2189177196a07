"""Job lists: the signed-in user's recent jobs on the home page; any user's (``/users/<name>``)
or account's (``/accounts/<name>``) jobs and their top waste for the staff; an account's
also for its Slurm coordinators (``sacctmgr``'s, ``webapp.sources.coordinators``).

Server-rendered tables sorted through links (``?sort=cpu_eff&order=asc``); every
parameter is validated (``query_params``: 400 naming it), every SQL value bound by the
sources. The home page of one cluster is paged by the archive's database
(``lists.my_jobs``: ``?page=2``) whenever the sync has run and the sort is one it
indexes; otherwise, and on the staff pages, the list is read whole and sorted here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, g, render_template, request
from flask.typing import ResponseReturnValue

from webapp.lists.job_list import STATES, WASTE_KEYS, ListQuery, select, top_waste, totals
from webapp.lists.my_jobs import MyJobs, paged, waste
from webapp.model import SourceUnavailable
from webapp.report.job_rows import JobRow
from webapp.report.service import ReportService
from webapp.web import auth
from webapp.web import query_params as params
from webapp.web.reports import get_service

bp = Blueprint("job_lists", __name__)
log = logging.getLogger(__name__)
WASTE_TITLES = {"cpu_waste": "CPU-hours unused", "gpu_waste": "GPU-hours idle",
                "mem_waste": "Memory GiB-hours unused"}
TOP = 10


def _query(default_sort: str = "submit") -> ListQuery:
    return params.list_query(request.args, auth.settings().cluster_names, default_sort)


def _rows(q: ListQuery, user: str | None = None,
          account: str | None = None) -> tuple[list[JobRow], list[str]]:
    """The jobs of every served cluster (or the one asked for), and what was missing."""
    s = auth.settings()
    now = datetime.now(UTC)
    rows: list[JobRow] = []
    gaps: list[str] = []
    for cluster in s.cluster_names:
        if q.cluster and cluster != q.cluster:
            continue
        try:
            found, missing = get_service(cluster).job_list(q.since(now), now, user=user,
                                                           account=account)
        except SourceUnavailable as exc:
            if cluster == s.cluster:
                raise  # the home cluster's accounting decides what anybody may see: 503
            log.warning("job list of cluster %s: %s (%s)", cluster, exc.reason, exc.detail)
            found, missing = [], [exc.reason]
        rows += found
        gaps += _sentences(f"cluster {cluster}: {gap}" if s.multi_cluster else gap
                           for gap in missing)
    return rows, gaps


def _sentences(gaps: Iterable[str]) -> list[str]:
    """Each note on what was missing as a sentence of the page."""
    return [f"{gap[0].upper()}{gap[1:]}." for gap in gaps]


def _render(template: str, q: ListQuery, rows: Sequence[JobRow], total: int, gaps: list[str],
            **extra: Any) -> str:
    s = auth.settings()
    return render_template(template, q=q, rows=rows, total=total, gaps=gaps,
                           states=STATES, clusters=s.cluster_names if s.multi_cluster else (),
                           endpoint=request.endpoint, view_args=request.view_args or {},
                           **extra)


def _paged(q: ListQuery, name: str, owner: str = "user", now: datetime | None = None,
           every_page: bool = False) -> tuple[list[ReportService], MyJobs] | None:
    """The database's page of a user's (or an account's) jobs, when it can: one cluster,
    or all of them when they are synced into one archive; with the services it read."""
    s = auth.settings()
    services = [get_service(c) for c in ([q.cluster] if q.cluster else s.cluster_names)]
    if not all(isinstance(service, ReportService) for service in services):
        return None  # a stand-in service (the tests' reports) has no archive to page
    mine = paged(services, name, q, now or datetime.now(UTC), owner=owner,
                 recent_on_every_page=every_page, home=s.cluster)
    return None if mine is None else (services, mine)


@dataclass(frozen=True)
class Listing:
    """What "My jobs" shows of one user for one query: the page the archive's database
    cut (``paged``: its ``recent`` jobs, then its ``rows``), else every row, filtered
    and sorted here."""

    rows: Sequence[JobRow]  # the archived page, or the whole list
    total: int
    gaps: list[str]  # sentences
    paged: MyJobs | None = None

    @property
    def shown(self) -> list[JobRow]:
        """Every row of the page in the page's order: the jobs not archived yet (page 1
        only, as the pages show them; the staff pages read them on every page for their
        waste) above the archived ones."""
        recent = self.paged.recent if self.paged and self.paged.page == 1 else []
        return [*recent, *self.rows]

    @property
    def next_page(self) -> int | None:
        """The next page's number; None on the last (a list read whole is one page)."""
        if self.paged is None or self.paged.page >= self.paged.pages:
            return None
        return self.paged.page + 1


def user_listing(q: ListQuery, name: str) -> Listing:
    """The jobs of user ``name`` as "My jobs" lists them (the home page, and the JSON API's
    rows: one computation for both)."""
    found = _paged(q, name)
    if found is not None:  # already filtered, sorted and cut by the database
        mine = found[1]
        return Listing(mine.rows, mine.total, _sentences(mine.gaps), mine)
    rows, gaps = _rows(q, user=name)
    return Listing(select(rows, q), len(rows), gaps)


def my_jobs() -> str:
    """The signed-in user's jobs of the last days (the home page), with the lookup form."""
    q = _query()
    mine = user_listing(q, g.user)
    return _render("index.html", q, mine.rows, mine.total, mine.gaps, paged=mine.paged,
                   title="My jobs", who=g.user)


def _staff_listing(q: ListQuery, kind: str, name: str,
                   now: datetime) -> tuple[Listing, list[ReportService] | None]:
    """The jobs of user or account (``kind``) ``name`` as its staff page lists them, with
    the services whose archive paged them (None: read whole). The jobs not archived yet
    are read on every page: the page's waste ranks them too."""
    found = _paged(q, name, kind, now, every_page=True)
    if found is not None:  # one page of the archive, cut by the database
        services, mine = found
        return Listing(mine.rows, mine.total, _sentences(mine.gaps), mine), services
    rows, gaps = _rows(q, **{kind: name})
    return Listing(select(rows, q), len(rows), gaps), None


def account_listing(q: ListQuery, name: str) -> Listing:
    """The jobs of account ``name`` as ``/accounts/<name>`` lists them (that page, and the
    JSON API's rows: one computation for both)."""
    return _staff_listing(q, "account", name, datetime.now(UTC))[0]


def check_account(name: str) -> None:
    """400 for a name no Slurm account has; 403 unless the user is staff or one of the
    account's Slurm coordinators (staff first: no sacctmgr call for them)."""
    params.slurm_name(name, "account")
    if not auth.is_staff(g.user) and not auth.coordinates(g.user, name):
        abort(403, description=f"Only support staff and the coordinators of account {name}"
              " may see its jobs.")


def _staff_page(kind: str, name: str) -> str:
    params.slurm_name(name, kind)
    q = _query()
    now = datetime.now(UTC)
    mine, services = _staff_listing(q, kind, name, now)
    if services is not None and mine.paged is not None:  # the database ranks and sums
        top, sums = waste(services, name, q, now, kind, mine.paged.recent, TOP)
    else:  # the filters apply to the waste too; its order is its own
        top = {k: top_waste(mine.rows, k, TOP) for k in WASTE_KEYS}
        sums = totals(mine.rows)
    return _render("job_list.html", q, mine.rows, mine.total, mine.gaps, paged=mine.paged,
                   kind=kind, name=name, waste=top, waste_titles=WASTE_TITLES, totals=sums)


@bp.get("/users/<name>")
def user(name: str) -> ResponseReturnValue:
    """One user's jobs and their top waste: staff, or the user themself."""
    if not auth.is_staff(g.user) and name != g.user:
        abort(403, description="Only support staff may see another user's jobs.")
    return _staff_page("user", name)


@bp.get("/accounts/<name>")
def account(name: str) -> ResponseReturnValue:
    """One account's jobs and their top waste: staff, or the account's coordinators."""
    check_account(name)
    return _staff_page("account", name)
