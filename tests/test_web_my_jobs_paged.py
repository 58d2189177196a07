"""The home page's job list paged by the archive's database, through the Flask test
client: a real SQLite archive filled by the scale generator (``tests/helpers/scale_archive.py``),
the real report service, and the accounting view's own SQL on captured rows (SQLite,
``tests/helpers/view_sqlite.py``) for the jobs the archive does not hold yet.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
from werkzeug.security import generate_password_hash

from tests.helpers import scale_archive
from tests.helpers.view_sqlite import SqliteView
from tests.helpers.web import login, make_app, password_settings
from webapp.archive.staff_rows import StaffRows
from webapp.archive.store import Archive
from webapp.lists.job_list import WASTE_KEYS, ListQuery, select, top_waste, totals
from webapp.lists.job_page import row_of
from webapp.report.service import ReportService
from webapp.sources.accounting import AccountingSource
from webapp.sources.no_metrics import NoMetrics
from webapp.sources.sacct import SacctSource
from webapp.staff.archived import staff_row

CLUSTER = scale_archive.CLUSTER
NOW = SYNCED = 0  # set when the module starts (_clock), not when it is collected
ROWS = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "accounting"
                   / "local-jobs-view-rows.json").read_text())
HEAVY = 300  # alice's archived jobs: six pages of 50


def _view_rows() -> list[dict]:
    """DERIVED from the captured rows of alice's job 1240 and bob's 1241: renumbered and
    moved to now. 7001 runs, 7002 ended after the watermark (not archived), 7003 ended
    after it and was archived in the same second (listed once), bob's 7004 runs."""
    busy = next(r for r in ROWS if r["job_id"] == 1240)
    idle = next(r for r in ROWS if r["job_id"] == 1241)
    at = {"cluster": CLUSTER, "submit_time": NOW - 600, "start_time": NOW - 590}
    return [
        {**busy, **at, "job_id": 7001, "state": 1, "end_time": 0, "job_name": "running"},
        {**busy, **at, "job_id": 7002, "end_time": NOW - 30, "job_name": "just-ended"},
        {**busy, **at, "job_id": 7003, "end_time": SYNCED, "job_name": "archived-now"},
        {**idle, **at, "job_id": 7004, "state": 1, "end_time": 0},
    ]


def _jobs() -> list:
    """The generator's week ending now; its busy user is alice, and one more job is 7003."""
    jobs = [dataclasses.replace(j, user="alice") if j.user == "user0000" else j
            for j in scale_archive.staff_jobs(1800, 20, until=SYNCED, heavy=HEAVY)]
    last = next(j for j in reversed(jobs) if j.user == "alice")
    return [*jobs, dataclasses.replace(last, job_id="7003", raw_id="7003", end=SYNCED)]


@pytest.fixture(scope="module", autouse=True)
def _clock() -> None:
    """Now, and the sync's watermark two minutes ago, as the module starts: the oldest
    generated job sits at the edge of the week the list shows, and the suite may run this
    module minutes after collecting it."""
    global NOW, SYNCED  # noqa: PLW0603 - read by the helpers below
    NOW = int(time.time())
    SYNCED = NOW - 120


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("paged") / "archive.sqlite"
    with Archive(str(path)) as a:
        with a.db.transaction():
            StaffRows(a.db).put(staff_row(CLUSTER, j) for j in _jobs())
        a.advance(CLUSTER, "archive", SYNCED)
    return str(path)


@pytest.fixture
def web_settings(tmp_path, archive):
    """The conftest's web settings on the module's archive (``app`` and ``client`` follow)."""
    return password_settings(tmp_path, cluster=CLUSTER, archive_url=archive)


@pytest.fixture
def web_service(web_settings, archive):
    """The real report service: the archive, the accounting view's SQL on the view rows."""
    view = SqliteView(_view_rows())
    return ReportService(
        web_settings, accounting=AccountingSource("mysql://unused", CLUSTER, connect=lambda: view),
        sacct=SacctSource("sacct", cluster=CLUSTER, runner=lambda argv: ""),
        prometheus=NoMetrics(CLUSTER), archive=Archive(archive))


def _ids(page: str, table: str) -> list[str]:
    body = re.search(rf'<table class="jobs" id="{table}">(.*?)</table>', page, re.S)
    assert body, f"no table {table}"
    return re.findall(r'data-job="([^"]+)"', body.group(1))


def _links(page: str) -> dict[str, str]:
    """The pager's links: rel -> the page it goes to."""
    return {rel: (re.findall(r"page=(\d+)", href) or ["1"])[0]
            for rel, href in re.findall(r'rel="(first|prev|next|last)" href="([^"]*)"', page)}


def _expected(q: ListQuery) -> list[str]:
    """alice's archived jobs in the list's own order (Python's sort of the same rows)."""
    mine = [row_of(staff_row(CLUSTER, j)) for j in _jobs() if j.user == "alice"]
    return [r.job_id for r in select(mine, q)]


def test_first_page_lists_the_jobs_not_archived_yet_then_fifty_archived_ones(client):
    login(client)
    page = client.get("/").get_data(as_text=True)
    # Running and ended since the sync, from the view; 7003 is archived: listed once.
    assert sorted(_ids(page, "recent")) == ["7001", "7002"]
    archived = _ids(page, "jobs")
    assert archived == _expected(ListQuery())[:50]
    assert "7003" in archived and "7004" not in page  # bob's running job is his
    assert "page 1 of 7" in page  # 301 archived jobs
    assert _links(page) == {"next": "2", "last": "7"}
    assert "Archived: 1–50 of 301 jobs" in page


def test_the_api_gives_the_same_pages_each_linking_the_next(client):
    """``/api/v1/jobs`` over the archive: each page's rows are the page's of "My jobs"
    (on page 1 the jobs not archived yet first), ``next`` the following page's URL, null
    on the last; every answer as the API's description says."""
    from tests.helpers.api import checked

    login(client)
    url: str | None = "/api/v1/jobs?sort=cpu_eff&order=asc"
    seen = []
    while url:
        body = checked(client.get(url)).get_json()
        html = client.get(f"/?sort=cpu_eff&order=asc&page={body['page']}").get_data(
            as_text=True)
        shown = (_ids(html, "recent") if body["page"] == 1 else []) + _ids(html, "jobs")
        assert [j["job_id"] for j in body["jobs"]] == shown
        seen.append(body["page"])
        url = body["next"]
    assert seen == [1, 2, 3, 4, 5, 6, 7] and body["pages"] == 7 and body["total"] == 301
    assert {j["figures_from"] for j in body["jobs"]} == {"archive"}



def test_the_api_gives_an_accounts_pages_as_its_page_does(client):
    """``/api/v1/accounts/<name>/jobs`` over the archive: each page's rows are the
    account page's (its jobs not archived yet on page 1 only, though that page reads them
    on every page for its waste), ``next`` the following page's URL."""
    from tests.helpers.api import checked

    login(client, "staffer")
    url: str | None = "/api/v1/accounts/acct00/jobs?sort=cpu_waste"
    seen = []
    while url:
        body = checked(client.get(url)).get_json()
        html = client.get(f"/accounts/acct00?sort=cpu_waste&page={body['page']}").get_data(
            as_text=True)
        shown = (_ids(html, "recent") if body["page"] == 1 else []) + _ids(html, "jobs")
        assert [j["job_id"] for j in body["jobs"]] == shown
        seen.append(body["page"])
        url = body["next"]
    assert seen == list(range(1, body["pages"] + 1)) and body["pages"] > 5
    assert body["account"] == "acct00" and body["list_url"].startswith("/accounts/acct00?")
    # research's jobs are the view's two not archived yet (7003 is archived as acct00's)
    first = checked(client.get("/api/v1/accounts/research/jobs")).get_json()
    assert sorted(j["job_id"] for j in first["jobs"]) == ["7001", "7002"]
    later = checked(client.get("/api/v1/accounts/research/jobs?page=2")).get_json()
    assert later["jobs"] == [] and later["page"] == 2 and later["next"] is None

def test_later_pages_are_cut_by_the_database_and_link_both_ways(client):
    login(client)
    page = client.get("/?page=3").get_data(as_text=True)
    assert _ids(page, "jobs") == _expected(ListQuery())[100:150]
    assert 'id="recent"' not in page  # the live jobs lead page 1 only
    assert _links(page) == {"first": "1", "prev": "2", "next": "4", "last": "7"}
    last = client.get("/?page=7").get_data(as_text=True)
    assert _ids(last, "jobs") == _expected(ListQuery())[300:]
    assert "Archived: 301–301 of 301 jobs" in last
    assert _links(last) == {"first": "1", "prev": "6"}


@pytest.mark.parametrize(("sort", "order"), [("cpu_eff", "asc"), ("mem_eff", "desc"),
                                             ("elapsed", "desc"), ("gpu_util", "desc")])
def test_a_sort_the_page_offers_is_done_by_the_database(client, sort, order):
    login(client)
    q = ListQuery(sort=sort, order=order, page=2)
    page = client.get(f"/?sort={sort}&order={order}&page=2").get_data(as_text=True)
    got, want = _ids(page, "jobs"), _expected(q)
    assert len(got) == 50
    # Equal values may tie in another order; the sort key's values must match row by row.
    from webapp.lists.job_list import SORT_KEYS

    rows = {r.job_id: r for r in (row_of(staff_row(CLUSTER, j)) for j in _jobs())}
    assert [SORT_KEYS[sort](rows[i]) for i in got] == \
        [SORT_KEYS[sort](rows[i]) for i in want[50:100]]
    # The column headers start the other order (or column) from the first page.
    assert f'href="/?sort={sort}&amp;order={"desc" if order == "asc" else "asc"}"' in page


def test_state_filter_is_applied_by_the_database(client):
    login(client)
    page = client.get("/?state=OUT_OF_MEMORY").get_data(as_text=True)
    oom = _expected(ListQuery(state="OUT_OF_MEMORY"))
    assert 0 < len(oom) < 50
    assert _ids(page, "jobs") == oom
    assert f"Archived: 1–{len(oom)} of {len(oom)} jobs, page 1 of 1" in page
    assert _ids(page, "recent") == []  # the view's jobs are running or COMPLETED


def test_sorts_the_archive_does_not_index_list_the_jobs_unpaged(client):
    login(client)
    page = client.get("/?sort=name").get_data(as_text=True)
    assert 'class="pager"' not in page and 'id="recent"' not in page
    assert {"7001", "7002"} <= set(_ids(page, "jobs"))  # the view's jobs, as before


def test_bad_pages_are_refused_and_a_page_past_the_end_links_back(client):
    login(client)
    for bad in ("0", "-1", "abc", "1e3", "100001"):
        assert client.get(f"/?page={bad}").status_code == 400
    page = client.get("/?page=40").get_data(as_text=True)
    assert _ids(page, "jobs") == [] and _links(page)["prev"] == "7"


def test_another_user_sees_only_their_own_jobs(client):
    login(client, "bob")
    page = client.get("/").get_data(as_text=True)
    assert _ids(page, "recent") == ["7004"]
    assert _ids(page, "jobs") == [] and "page 1 of 1" in page


def test_before_the_first_sync_the_list_is_read_unpaged(tmp_path, client):
    with Archive(str(tmp_path / "fresh.sqlite")) as a:  # no watermark: never synced
        service = client.application.extensions["jobreport.service"]
        fresh = ReportService(service.settings, accounting=service.accounting,
                              sacct=service.sacct, prometheus=service.prometheus, archive=a)
        client.application.extensions["jobreport.service"] = fresh
        login(client)
        page = client.get("/").get_data(as_text=True)
    assert 'class="pager"' not in page and set(_ids(page, "jobs")) == {"7001", "7002", "7003"}



def test_the_load_benchs_app_serves_its_generated_site(tmp_path, monkeypatch):
    """``bench/bench_web_scale.py`` at small scale, without gunicorn: its archive, its view
    rows and its app serve each person's pages, report pages rebuilt from the archive."""
    from bench import bench_web_scale

    per_user, view = bench_web_scale.fill(tmp_path, 3000, 100, 3, heavy=300)
    assert sorted(per_user) == ["user0000", "user0001", "user0002"]
    (tmp_path / "pw").write_text(f"user0001:{generate_password_hash('pw')}\n")
    for key, value in {"BENCH_VIEW": str(view), "JOBREPORT_CLUSTER": CLUSTER,
                       "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
                       "JOBREPORT_PROMETHEUS_URL": "", "JOBREPORT_SECRET_KEY": "x" * 40,
                       "JOBREPORT_PASSWORD_FILE": str(tmp_path / "pw"),
                       "JOBREPORT_SESSION_COOKIE_SECURE": "0",
                       "JOBREPORT_WEB_STATE": str(tmp_path / "s.sqlite"),
                       "JOBREPORT_OUTBOX": str(tmp_path / "o.sqlite")}.items():
        monkeypatch.setenv(key, value)
    client = bench_web_scale.app().test_client()
    login(client, "user0001", "pw")
    page = client.get("/").get_data(as_text=True)
    assert len(_ids(page, "recent")) == bench_web_scale.RUNNING
    mine = per_user["user0001"]
    assert sorted(_ids(page, "jobs")) == sorted(mine)
    report = client.get(f"/jobs/{mine[-1]}")
    assert report.status_code == 200 and "archive" in report.get_data(as_text=True)
    assert client.get(f"/jobs/{per_user['user0000'][0]}").status_code == 403


def test_jobs_archived_without_their_row_send_the_list_back_to_unpaged(client, archive):
    """A job the sync archived before it wrote staff rows would be missing from a page:
    while the user has more archived jobs than rows in the window, the list is read whole."""
    from tests.helpers.reports import sample_report
    from webapp.report.archived import archive_record

    login(client, "bob")  # no staff rows: an empty page so far
    assert 'class="pager"' in client.get("/").get_data(as_text=True)
    with Archive(archive) as a:
        old = dataclasses.replace(archive_record(sample_report("6999", "bob")),
                                  cluster=CLUSTER, end_time=SYNCED - 3600)
        assert a.put(old)
        try:
            page = client.get("/").get_data(as_text=True)
            assert 'class="pager"' not in page and _ids(page, "jobs") == ["7004"]
        finally:
            a.db.execute("DELETE FROM archive_jobs WHERE job_id = '6999'")
    assert 'class="pager"' in client.get("/").get_data(as_text=True)


def _waste_tables(page: str) -> dict[str, list[str]]:
    return {key: re.findall(r'<a href="[^"]*">([^<]+)</a>', body)
            for key, body in re.findall(r'id="waste-(\w+)">(.*?)</table>', page, re.S)}


@pytest.mark.parametrize(("path", "who"), [("/users/alice", "user"),
                                           ("/accounts/acct00", "account")])
def test_staff_pages_are_paged_ranked_and_summed_by_the_database(client, path, who):
    """A user's and an account's page over the archive: one page of the jobs, and the
    waste tables and sums over all of them, as the list ranks and sums them in Python."""
    login(client, "staffer")
    page = client.get(f"{path}?sort=cpu_waste").get_data(as_text=True)
    mine = [row_of(staff_row(CLUSTER, j)) for j in _jobs()
            if (j.user if who == "user" else j.account) == path.rsplit("/", 1)[1]]
    assert len(mine) > 250
    q = ListQuery(sort="cpu_waste")
    assert _ids(page, "jobs") == [r.job_id for r in select(mine, q)][:50]
    assert _links(page)["next"] == "2" and 'id="archived-title"' in page
    if who == "user":  # alice's running job and the one ended since the sync
        assert sorted(_ids(page, "recent")) == ["7001", "7002"]
    tables = _waste_tables(page)
    assert set(tables) == set(WASTE_KEYS)
    for key in WASTE_KEYS:
        assert tables[key] == [r.job_id for r in top_waste(mine, key, 10)], key
    assert tables["cpu_waste"] and tables["mem_waste"]
    sums = totals(mine)  # the two not archived have no figures: nothing to add
    shown = re.search(r"Unused over the (\d+) jobs of the window: ([\d.]+) CPU-hours,\s+"
                      r"([\d.]+) GPU-hours, ([\d.]+) memory GiB-hours", page)
    assert shown, "no sums"
    assert shown.groups() == (str(len(mine) + (2 if who == "user" else 0)),
                              *(f"{sums[k]:.2f}" for k in WASTE_KEYS))
    later = client.get(f"{path}?sort=cpu_waste&page=3").get_data(as_text=True)
    assert _ids(later, "jobs") == [r.job_id for r in select(mine, q)][100:150]
    assert _waste_tables(later) == tables  # the tables rank the window, on every page
    assert client.get(f"{path}?sort=name").status_code == 200  # read whole, as before


def test_several_clusters_synced_into_one_archive_are_paged_together(tmp_path):
    """A web app serving two clusters whose sync writes one archive: "my jobs" of both is
    one page of the database, sorted across them, with each cluster's jobs not archived
    yet above it; a cluster never synced sends the list back to unpaged."""
    alice = [j for j in _jobs() if j.user == "alice" and j.job_id != "7003"]
    path = str(tmp_path / "two.sqlite")
    with Archive(path) as a:
        with a.db.transaction():
            StaffRows(a.db).put([*(staff_row(CLUSTER, j) for j in alice[:80]),
                                 *(staff_row("other", j) for j in alice[80:160])])
        a.advance(CLUSTER, "archive", SYNCED)
    settings = password_settings(tmp_path, cluster=CLUSTER, clusters={"other": ""},
                                 archive_url=path)
    running = {**_view_rows()[0], "cluster": "other", "job_id": 8001}
    services = {}
    for cluster, rows in ((CLUSTER, _view_rows()), ("other", [running])):
        view = SqliteView(rows)
        services[cluster] = ReportService(
            settings.for_cluster(cluster), prometheus=NoMetrics(cluster),
            accounting=AccountingSource("mysql://unused", cluster, connect=lambda v=view: v),
            sacct=SacctSource("sacct", cluster=cluster, runner=lambda argv: ""),
            archive=Archive(path))
    app = make_app(settings, services[CLUSTER])
    app.extensions["jobreport.service.other"] = services["other"]
    client = app.test_client()
    login(client)
    unpaged = client.get("/").get_data(as_text=True)
    assert 'class="pager"' not in unpaged  # "other" has no watermark yet: read whole
    with Archive(path) as a:
        a.advance("other", "archive", SYNCED)
    page = client.get("/").get_data(as_text=True)
    both = [row_of(staff_row(CLUSTER, j)) for j in alice[:80]] + \
        [row_of(staff_row("other", j)) for j in alice[80:160]]
    expected = select(both, ListQuery())
    assert _ids(page, "jobs") == [r.job_id for r in expected[:50]]
    assert "page 1 of 4" in page and _links(page)["last"] == "4"
    assert sorted(_ids(page, "recent")) == ["7001", "7002", "7003", "8001"]
    pairs = []
    for n in range(1, 5):  # each row links to its own cluster's report
        body = client.get(f"/?page={n}").get_data(as_text=True).split('id="jobs"')[1]
        pairs += list(dict.fromkeys(re.findall(r'href="/c/(\w+)/jobs/(\d+)"', body)))
    assert pairs == [(r.cluster, r.job_id) for r in expected]
    assert {c for c, _ in pairs} == {CLUSTER, "other"}
