"""The accounting view on slurmdbd's schemas of Slurm 24.11 and 26.05 (the VM clusters),
set up from this host over TCP as a site whose database server is another machine:
``jobreport db-setup --admin-host``, run twice; the restricted user reads the views and
nothing else; ended jobs read through the view equal the VM's own ``sacct`` lines; and
AdminComment is written and read back both ways (``sacctmgr`` in the VM, ``database``
as a user granted UPDATE(admin_comment) only). 22.05 (the stack's) is tests/stack's."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pymysql
import pytest

from jobreport_common.slurm_values import gpus_from_tres, parse_tres
from mgmt.setup import views_read
from tests.helpers import vm
from tests.helpers.stack import FINAL_STATES, STACK_ROOT, StackJob
from tests.helpers.wait import wait_for
from tests.test_db_setup import QOS_HEAD, SCHEMAS
from webapp.model import AccountingJob
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource
from webapp.sources.sacct import SacctSource
from webapp.sources.sacct_values import parse_alloc_memory, parse_sacct_state, parse_time_limit
from webapp.sync.admin_comment import (
    KEPT,
    WRITTEN,
    DatabaseCommentWriter,
    SacctmgrCommentWriter,
)

pytestmark = pytest.mark.parametrize("cluster", vm.CLUSTERS)

# scripts/vm-cluster: the VMs' MariaDB administrator, allowed from the host only, which
# the guests see as 10.0.2.2 (QEMU's user network); the host reaches them on a forward.
ADMIN_USER, ADMIN_PASSWORD = "jobreport_admin", "jobreport-vm-admin"
HOST_AS_SEEN = "10.0.2.2"
COMMENT_USER, COMMENT_PASSWORD = "jobreport_comment", "jobreport-comment-vm"
# jobstats' own format: mixed case and base64, which a lowercasing sacctmgr would ruin.
COMMENT = "JS1:H4sIAKxGbWYC/6tWSs7PS8tMVbJSUErOLy0uyc9VqgUAbD+J1hwAAAA="
SACCT = ("JobID", "JobIDRaw", "UID", "User", "Account", "Partition", "JobName", "State",
         "ExitCode", "Submit", "Start", "End", "AllocCPUS", "AllocTRES", "Timelimit",
         "NodeList", "WorkDir", "QOS")

# Own jobs, each ended in a way the view encodes differently (sacct lines per job). No
# heterogeneous job: on these one-node clusters one stayed pending (Resources) on both
# releases, holding the node for itself and every job queued behind it.
JOBS = (
    (StackJob("acct-done", "alice", ("-c1", "--mem=50M", "--time=2"), "true"), 1),
    (StackJob("acct-failed", "bob", ("-c2", "--mem-per-cpu=30M", "--time=3"), "exit 3"), 1),
    (StackJob("acct-array", "alice", ("-a", "1-2", "-c1", "--mem=40M", "--time=2"), "true"), 2),
)


def _settings(vm_env: dict[str, str], cluster: str) -> Settings:
    """The stack's settings for the VM cluster: the reader's URL (and password) it serves."""
    return Settings.from_env(vm_env).for_cluster(cluster)


@contextmanager
def _connect(cluster: str, user: str, password: str, **kw) -> Iterator[pymysql.Connection]:
    conn = pymysql.connect(host="127.0.0.1", port=vm.port(cluster, "mariadb"), user=user,
                           password=password, connect_timeout=30, autocommit=True, **kw)
    try:
        yield conn
    finally:
        conn.close()


def _db_setup(vm_env: dict[str, str], cluster: str) -> subprocess.CompletedProcess[str]:
    port = vm.port(cluster, "mariadb")
    env = {**os.environ, "JOBREPORT_CONFIG": "",
           "JOBREPORT_DB_URL": _settings(vm_env, cluster).db_url}
    return subprocess.run(
        [str(STACK_ROOT / ".venv" / "bin" / "jobreport"), "db-setup",
         "--admin-host", f"127.0.0.1:{port}", "--admin-user", ADMIN_USER,
         "--admin-password", ADMIN_PASSWORD, "--reader-host", HOST_AS_SEEN,
         "--cluster", cluster], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def own_jobs(vm_env) -> dict[str, dict[str, str]]:
    """JOBS submitted on both clusters at once (they queue behind other tests' jobs):
    cluster -> name -> job id."""
    return {c: {job.name: vm.submit(c, job) for job, _ in JOBS}
            for c in vm.CLUSTERS}


@pytest.fixture(scope="module")
def setups(vm_env, own_jobs) -> dict[str, list[tuple[subprocess.CompletedProcess[str], float]]]:
    """db-setup run twice on each cluster: (result, seconds) of each run."""
    out: dict[str, list[tuple[subprocess.CompletedProcess[str], float]]] = {}
    for cluster in vm.CLUSTERS:
        for _ in range(2):
            t0 = time.monotonic()
            run = _db_setup(vm_env, cluster)
            out.setdefault(cluster, []).append((run, time.monotonic() - t0))
    return out


def _sacct(cluster: str, job_ids: list[str]) -> dict[str, dict[str, str]]:
    """The VM's own sacct lines of the jobs (allocations), times in Unix seconds."""
    text = vm.run(cluster, "env", "SLURM_TIME_FORMAT=%s", "sacct", "-X", "-n", "-P",
                  "--allusers", "--format", ",".join(SACCT), "-j", ",".join(job_ids)).stdout
    return {p[0]: dict(zip(SACCT, p, strict=True))
            for p in (line.split("|") for line in text.splitlines() if line)}


def _ended(cluster: str, ids: dict[str, str], timeout: float = 1800) -> dict[str, dict[str, str]]:
    """Wait until every job of ``ids`` (name -> id) has all its lines, each ended."""
    lines = {job.name: n for job, n in JOBS}
    rows: dict[str, dict[str, str]] = {}

    def ended() -> bool:
        rows.clear()
        rows.update(_sacct(cluster, list(ids.values())))
        done = {name: [r for r in rows.values()
                       if r["JobID"].split("_")[0].split("+")[0] == jid]
                for name, jid in ids.items()}
        return all(len(done[n]) == lines[n] and all(
            parse_sacct_state(r["State"])[0] in FINAL_STATES for r in done[n]) for n in ids)

    wait_for(ended, timeout, lambda: f"{cluster}: every job ended: {rows}", every=3)
    return rows


@pytest.fixture(scope="module")
def ended(own_jobs) -> dict[str, dict[str, dict[str, str]]]:
    """cluster -> sacct JobID -> its sacct line, once all own jobs ended on both."""
    return {c: _ended(c, own_jobs[c]) for c in vm.CLUSTERS}


def test_db_setup_over_tcp_succeeds_twice(setups, cluster):
    for run, seconds in setups[cluster]:
        assert run.returncode == 0, run.stderr
        assert run.stdout == f"jobreport views ready for cluster(s): {cluster}\n"
        assert seconds < 60
    with _connect(cluster, ADMIN_USER, ADMIN_PASSWORD) as conn, conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR %s@%s", ("jobreport", HOST_AS_SEEN))
        grants = sorted(r[0] for r in cur.fetchall())
        cur.execute("SHOW GRANTS FOR 'jobreport_definer'@'localhost'")
        definer = " ".join(r[0] for r in cur.fetchall())
    assert [g.split(" IDENTIFIED")[0] for g in grants] == [
        f"GRANT SELECT ON `jobreport`.`{view}` TO `jobreport`@`10.0.2.2`"
        for view in ("jobs", "node_events", "tres")] + [
        "GRANT USAGE ON *.* TO `jobreport`@`10.0.2.2`"]
    assert f"`{cluster}_job_table`" in definer and f"`{cluster}_event_table`" in definer
    assert "job_script" not in definer and "job_env" not in definer


def test_the_schema_is_the_one_the_unit_tests_hold(vm_env, cluster):
    """tests/test_db_setup.py checks the view's SQL against these columns offline."""
    version = vm.VERSIONS[cluster]
    with _connect(cluster, ADMIN_USER, ADMIN_PASSWORD) as conn, conn.cursor() as cur:
        live = {}
        for table in ("job_table", "assoc_table", "event_table"):
            cur.execute(f"SHOW COLUMNS FROM slurm_acct_db.`{cluster}_{table}`")
            live[f"c_{table}"] = tuple(r[0] for r in cur.fetchall())
        cur.execute("SHOW COLUMNS FROM slurm_acct_db.tres_table")
        live["tres_table"] = tuple(r[0] for r in cur.fetchall())
        cur.execute("SHOW COLUMNS FROM slurm_acct_db.qos_table")
        qos = {r[0] for r in cur.fetchall()}
    assert live == SCHEMAS[version]
    read = views_read([cluster])
    assert read[f"{cluster}_job_table"] <= set(live["c_job_table"])
    assert read[f"{cluster}_event_table"] <= set(live["c_event_table"])
    assert read["qos_table"] <= QOS_HEAD <= qos  # the unit tests' qos_table


def test_the_reader_reads_the_views_and_nothing_else(setups, vm_env, cluster):
    from webapp.sources.accounting import connect_from_url

    conn = connect_from_url(_settings(vm_env, cluster).db_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM jobs WHERE cluster = %s", (cluster,))
            assert cur.fetchone()["n"] > 0
            cur.execute("SELECT name FROM tres WHERE type = 'gres'")
            assert {"gpu", "gpu:t4"} <= {r["name"] for r in cur.fetchall()}
            for table in ("job_script_table", "job_env_table", "job_table", "assoc_table"):
                with pytest.raises(pymysql.err.OperationalError) as err:
                    cur.execute(f"SELECT * FROM slurm_acct_db.`{cluster}_{table}`"  # noqa: S608
                                " LIMIT 1")
                assert err.value.args[0] == 1142, table  # SELECT command denied
    finally:
        conn.close()


def _from_sacct(line: dict[str, str]) -> dict[str, object]:
    """One sacct line, in the terms of an AccountingJob."""
    tres = parse_tres(line["AllocTRES"])
    return {
        "job_id": line["JobID"], "uid": int(line["UID"]), "user": line["User"],
        "account": line["Account"], "partition": line["Partition"],
        "job_name": line["JobName"], "state": parse_sacct_state(line["State"])[0],
        "exit_code": line["ExitCode"], "submit": int(line["Submit"]),
        "start": int(line["Start"]), "end": int(line["End"]), "cpus": int(line["AllocCPUS"]),
        "memory": parse_alloc_memory(tres.get("mem", "")), "gpus": gpus_from_tres(tres),
        "billing": float(tres["billing"]), "time_limit": parse_time_limit(line["Timelimit"])[1],
        "node_list": line["NodeList"], "work_dir": line["WorkDir"], "qos": line["QOS"],
    }


def _from_view(job: AccountingJob) -> dict[str, object]:
    return {
        "job_id": job.job_id, "uid": job.uid, "user": job.user, "account": job.account,
        "partition": job.partition, "job_name": job.job_name, "state": job.state,
        "exit_code": job.exit_code, "submit": int(job.submit_time.timestamp()),
        "start": int(job.start_time.timestamp()), "end": int(job.end_time.timestamp()),
        "cpus": job.cpus, "memory": job.memory_requested_bytes, "gpus": job.gpus,
        "billing": job.billing, "time_limit": job.time_limit_seconds,
        "node_list": job.node_list, "work_dir": job.work_dir, "qos": job.qos,
    }


def test_ended_jobs_through_the_view_equal_sacct(setups, ended, vm_env, cluster):
    source = AccountingSource(_settings(vm_env, cluster).db_url, cluster)
    lines = ended[cluster]
    assert len(lines) == sum(n for _, n in JOBS)
    for job_id, line in lines.items():
        assert _from_view(source.job(job_id)) == _from_sacct(line), job_id
    states = {parse_sacct_state(line["State"])[0] for line in lines.values()}
    assert {"COMPLETED", "FAILED"} <= states
    assert any("_" in j for j in lines)
    # Many at once (the sync's read) gives the same records.
    assert {j: _from_view(r) for j, r in source.jobs(list(lines)).items()} == {
        j: _from_sacct(line) for j, line in lines.items()}


def _comment_writers(vm_env: dict[str, str], cluster: str):
    """The database route's user (what docs/archive.md asks a DBA to create), then both
    writers: (sacctmgr's, the database's)."""
    table = f"slurm_acct_db.`{cluster}_job_table`"
    with _connect(cluster, ADMIN_USER, ADMIN_PASSWORD) as conn, conn.cursor() as cur:
        cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s",
                    (COMMENT_USER, HOST_AS_SEEN, COMMENT_PASSWORD))
        cur.execute("ALTER USER %s@%s IDENTIFIED BY %s",
                    (COMMENT_USER, HOST_AS_SEEN, COMMENT_PASSWORD))
        cur.execute(f"GRANT SELECT (id_job, time_submit, admin_comment), UPDATE (admin_comment)"
                    f" ON {table} TO %s@%s", (COMMENT_USER, HOST_AS_SEEN))
    settings = _settings(vm_env, cluster)
    url = (f"mysql://{COMMENT_USER}:{COMMENT_PASSWORD}@127.0.0.1:"
           f"{vm.port(cluster, 'mariadb')}/slurm_acct_db")
    return (SacctmgrCommentWriter(cluster, settings.sacct, settings.sacctmgr, timeout=120),
            DatabaseCommentWriter(url, cluster))


def test_admin_comment_round_trip(setups, ended, own_jobs, vm_env, cluster):
    sacctmgr, database = _comment_writers(vm_env, cluster)
    sacct = SacctSource(_settings(vm_env, cluster).sacct, timeout=120, cluster=cluster)
    lines = ended[cluster]
    for writer, name in ((database, "acct-done"), (sacctmgr, "acct-failed")):
        job_id = own_jobs[cluster][name]
        submit = int(lines[job_id]["Submit"])
        assert sacct.admin_comment(job_id) == ""
        assert writer.write(job_id, job_id, submit, COMMENT) == WRITTEN, writer.name
        assert sacct.admin_comment(job_id) == COMMENT, writer.name  # as written, case kept
        # Never over a comment already there.
        assert writer.write(job_id, job_id, submit, "JS1:other") == KEPT, writer.name
        assert sacct.admin_comment(job_id) == COMMENT, writer.name
    # The database route's user can change that column and nothing else.
    with _connect(cluster, COMMENT_USER, COMMENT_PASSWORD) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.OperationalError) as err:
            cur.execute(f"UPDATE slurm_acct_db.`{cluster}_job_table` SET state = 3"  # noqa: S608
                        " WHERE id_job = 0")
        assert err.value.args[0] == 1143  # column command denied
