"""Two clusters in one accounting database: a second cluster registered in slurmdbd, one
real job of the first copied into its job table under the same id. db-setup's view covers
both, and the same id opens two different reports (web and command line).

slurmdbd creates and drops a cluster's tables itself (``sacctmgr add/delete cluster``),
without a restart and without touching the first cluster; the teardown deletes the second
cluster and runs db-setup again, and a left-over from an interrupted run is removed first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Iterator

import pymysql
import pytest

from mgmt.setup import IDENT_RE
from tests.helpers import stack
from tests.helpers.web import SECRET, login, make_client, password_file
from webapp.settings import SETTINGS_DOC, Settings
from webapp.sources.accounting import connect_from_url

SECOND = "jrsecond"  # a name no real cluster of the stack has
ACCT_DB = "slurm_acct_db"
SOCKET = "/run/mysqld/mysqld.sock"


def _sacctmgr(*args: str, check: bool = True) -> None:
    subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, check=check)


def _root() -> pymysql.connections.Connection:
    return pymysql.connect(unix_socket=SOCKET, user="root", database=ACCT_DB, autocommit=True)


def _remove_second(stack_env: dict[str, str]) -> None:
    """Delete the second cluster, rebuild the view without it, then drop the tables
    slurmdbd keeps of a cluster that had jobs (a re-added cluster would find its old rows
    again). In that order: the view never names a dropped table, so the reports other
    tests build meanwhile never fail."""
    _sacctmgr("delete", "cluster", SECOND, check=False)
    subprocess.run([str(stack.ROOT / ".venv" / "bin" / "jobreport"), "db-setup"],
                   env={**os.environ, **stack_env}, capture_output=True, check=False)
    conn = _root()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE"
                        " table_schema = %s AND table_name LIKE %s",
                        (ACCT_DB, SECOND.replace("_", "\\_") + "\\_%"))
            for (table,) in cur.fetchall():
                assert table.startswith(f"{SECOND}_")
                cur.execute(f"DROP TABLE IF EXISTS `{table}`")
    finally:
        conn.close()


def _copy_job(first: str, job_id: str) -> None:
    """The first cluster's row of ``job_id``, copied into the second cluster's job table
    (its own association of the same user: ``id_assoc`` is per cluster)."""
    conn = _root()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT column_name FROM information_schema.columns WHERE"
                        " table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                        (ACCT_DB, f"{SECOND}_job_table"))
            columns = [r[0] for r in cur.fetchall() if r[0] not in ("job_db_inx", "id_assoc")]
            # Table names cannot be bound parameters: checked names; every value is bound.
            assert IDENT_RE.match(first)
            cur.execute(f"SELECT a.user FROM `{first}_job_table` j"  # noqa: S608
                        f" JOIN `{first}_assoc_table` a ON a.id_assoc = j.id_assoc"
                        " WHERE j.id_job = %s ORDER BY j.time_submit DESC LIMIT 1", (int(job_id),))
            (user,) = cur.fetchone()
            cur.execute(f"SELECT id_assoc FROM `{SECOND}_assoc_table` WHERE user = %s"  # noqa: S608
                        " AND deleted = 0 ORDER BY id_assoc LIMIT 1", (user,))
            (assoc,) = cur.fetchone()
            names = ", ".join(f"`{c}`" for c in columns)
            cur.execute(f"INSERT INTO `{SECOND}_job_table` ({names}, id_assoc)"  # noqa: S608
                        f" SELECT {names}, %s FROM `{first}_job_table` WHERE id_job = %s"
                        " ORDER BY time_submit DESC LIMIT 1",
                        (assoc, int(job_id)))
            assert cur.rowcount == 1
    finally:
        conn.close()


@pytest.fixture(scope="module")
def two_clusters(stack_env, stack_jobs) -> Iterator[str]:
    """The second cluster with a copy of the busy job; yields the shared job id."""
    first, job_id = stack_env["JOBREPORT_CLUSTER"], stack_jobs["busy"]
    _remove_second(stack_env)
    try:
        _sacctmgr("add", "cluster", SECOND)
        _sacctmgr("add", "account", "research", f"cluster={SECOND}")
        _sacctmgr("add", "user", "alice", "account=research", f"cluster={SECOND}")
        _copy_job(first, job_id)
        run = stack.jobreport("db-setup")  # no --cluster: every registered cluster
        assert run.returncode == 0, run.stderr
        assert SECOND in run.stdout and first in run.stdout
        yield job_id
    finally:
        _remove_second(stack_env)


def test_the_view_covers_every_registered_cluster(two_clusters, stack_env):
    conn = connect_from_url(stack_env["JOBREPORT_DB_URL"])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT cluster, user, job_name, submit_time FROM jobs WHERE"
                        " job_id = %s ORDER BY cluster, submit_time", (int(two_clusters),))
            rows = cur.fetchall()
    finally:
        conn.close()
    # Ids repeat after a controller reset: the first cluster may hold older jobs of this id;
    # each cluster's newest is the session's (as the report picks it).
    clusters = [r["cluster"] for r in rows]
    assert set(clusters) == {stack_env["JOBREPORT_CLUSTER"], SECOND}
    assert clusters.count(SECOND) == 1
    newest = {r["cluster"]: r for r in rows}  # sorted by submit time within a cluster
    assert {r["user"] for r in newest.values()} == {"alice"}


def _settings(stack_env) -> Settings:
    base = Settings.from_env({k: v for k, v in stack_env.items() if k in SETTINGS_DOC})
    return dataclasses.replace(base, clusters={SECOND: ""})


def test_same_id_two_reports_on_the_web(two_clusters, stack_env, tmp_path):
    first = stack_env["JOBREPORT_CLUSTER"]
    settings = dataclasses.replace(
        _settings(stack_env), secret_key=SECRET, password_file=password_file(tmp_path),
        web_state=str(tmp_path / "state.sqlite"), archive_url=str(tmp_path / "a.sqlite"))
    client = make_client(settings, None)  # the real report service, built on first use
    login(client, "alice")
    one = client.get(f"/c/{first}/jobs/{two_clusters}.json")
    two = client.get(f"/c/{SECOND}/jobs/{two_clusters}.json")
    assert one.status_code == two.status_code == 200
    a, b = one.get_json(), two.get_json()
    assert (a["cluster"], b["cluster"]) == (first, SECOND)
    assert a["job_id"] == b["job_id"] == two_clusters and a["user"] == b["user"] == "alice"
    # The second cluster has no Prometheus here: its report says so rather than borrowing
    # the first cluster's series of the same id.
    assert any(a["series"].values()) and not any(b["series"].values())
    assert any("no Prometheus is configured" in g["reason"] for g in b["gaps"])
    page = client.get(f"/c/{SECOND}/jobs/{two_clusters}").get_data(as_text=True)
    assert f"{two_clusters} on {SECOND}" in page
    home = client.get("/").get_data(as_text=True)
    assert f'href="/c/{SECOND}/jobs/{two_clusters}"' in home
    assert f'href="/c/{first}/jobs/{two_clusters}"' in home
    r = client.get(f"/?job={two_clusters}&cluster={SECOND}")
    assert r.headers["Location"].endswith(f"/c/{SECOND}/jobs/{two_clusters}")


def test_same_id_two_reports_on_the_command_line(two_clusters, stack_env):
    env = {**stack_env, "JOBREPORT_CLUSTERS": SECOND}
    reports = {}
    for cluster in (stack_env["JOBREPORT_CLUSTER"], SECOND):
        run = stack.jobreport("show", two_clusters, "--cluster", cluster, "--format", "json",
                              env=env)
        assert run.returncode == 0, run.stderr
        reports[cluster] = json.loads(run.stdout)
    assert {c: r["cluster"] for c, r in reports.items()} == {c: c for c in reports}
    default = json.loads(stack.jobreport("show", two_clusters, "--format", "json",
                                         env=env).stdout)
    assert default["cluster"] == stack_env["JOBREPORT_CLUSTER"]
    bad = stack.jobreport("show", two_clusters, "--cluster", "nowhere", env=env)
    assert bad.returncode == 2 and "unknown cluster 'nowhere'" in bad.stderr
