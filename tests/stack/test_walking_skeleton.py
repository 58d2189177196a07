"""End to end on the real stack: Slurm runs jobs, the exporter reads their cgroups,
Prometheus scrapes it, and ``jobreport show`` joins Prometheus, the DB and sacct."""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import closing

import pymysql
import pytest
import requests

from tests.helpers import stack


def _show(job_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return stack.jobreport("show", job_id, *extra)


def test_busy_job_is_efficient(stack_jobs):
    out = _show(stack_jobs["busy"], "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["user"] == "alice" and data["account"] == "research"
    # Runnable all along (its neighbours on the shared cores may have made it wait).
    assert stack.runnable_share(data["cpu_seconds"], data["usage"]["cpu_wait_seconds"],
                                data["elapsed_seconds"], data["cpus"]) >= 0.85
    # seff's figure is what it got: at least a quarter of its core on a loaded machine
    assert data["cpu_efficiency"] >= 0.25 and data["state"] == "COMPLETED"


def test_idle_job_is_not(stack_jobs):
    out = _show(stack_jobs["idle"], "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["user"] == "bob" and data["account"] == "teaching"
    assert data["cpu_efficiency"] <= 0.10


def test_text_report_names_owner_and_efficiency(stack_jobs):
    out = _show(stack_jobs["busy"])
    assert out.returncode == 0, out.stderr
    assert "alice (account research)" in out.stdout
    assert len(out.stdout.splitlines()) <= 40  # one screen; the rest with --details
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
    details = _show(stack_jobs["busy"], "--details").stdout
    assert "\nPlots\n  CPU " in details


@pytest.mark.parametrize("name", ["busy", "idle"])
def test_prometheus_holds_cpu_series(stack_jobs, stack_env, name):
    query = f'jobs_cpu_seconds_total{{jobid="{stack_jobs[name]}"}}[1h]'
    resp = requests.get(
        f"{stack_env['JOBREPORT_PROMETHEUS_URL']}/api/v1/query", params={"query": query}, timeout=10
    ).json()
    assert resp["status"] == "success"
    modes = {r["metric"]["mode"] for r in resp["data"]["result"]}
    assert modes == {"user", "system"}


def _reader(stack_env):
    from webapp.sources.accounting import connect_from_url

    return connect_from_url(stack_env["JOBREPORT_DB_URL"])


def test_restricted_user_reads_the_view(stack_jobs, stack_env):
    # Closed whatever the verdict: an open read holds the view's metadata lock, and
    # db-setup's CREATE OR REPLACE VIEW (the next test) would wait for it.
    with closing(_reader(stack_env)) as conn, conn.cursor() as cur:
        # Ids repeat after a controller reset: the newest of the id, as the report picks it.
        cur.execute("SELECT user, account, qos FROM jobs WHERE cluster = %s AND job_id = %s"
                    " ORDER BY submit_time DESC LIMIT 1",
                    (stack_env["JOBREPORT_CLUSTER"], int(stack_jobs["busy"])))
        # the QoS by name (qos_table): the stack's only one, Slurm's default
        assert cur.fetchone() == {"user": "alice", "account": "research", "qos": "normal"}


@pytest.mark.parametrize(
    "table", ["demo_job_script_table", "demo_job_env_table", "demo_job_table", "demo_assoc_table"]
)
def test_restricted_user_is_refused_elsewhere(stack_env, table):
    with closing(_reader(stack_env)) as conn, conn.cursor() as cur, \
            pytest.raises(pymysql.err.OperationalError) as err:
        cur.execute(f"SELECT * FROM slurm_acct_db.{table} LIMIT 1")  # noqa: S608 - fixed names
    assert err.value.args[0] == 1142  # SELECT command denied


def test_db_setup_is_idempotent_and_prints_sql(stack_env):
    first = stack.jobreport("db-setup", "--cluster", "demo", "--print")
    assert first.returncode == 0
    assert "SQL SECURITY DEFINER" in first.stdout and "job_script" not in first.stdout
    for _ in range(2):
        run = stack.jobreport("db-setup", "--cluster", "demo")
        assert run.returncode == 0, run.stderr
    grants = subprocess.run(
        ["mysql", "-N", "-e", "SHOW GRANTS FOR 'jobreport'@'127.0.0.1'"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = sorted(grants.splitlines())
    assert lines[0].startswith("GRANT SELECT ON `jobreport`.`jobs`")
    assert lines[1].startswith("GRANT SELECT ON `jobreport`.`node_events`")
    assert lines[2].startswith("GRANT SELECT ON `jobreport`.`tres`")
    assert lines[3].startswith("GRANT USAGE ON *.* TO `jobreport`@`127.0.0.1`")
    assert len(lines) == 4


def _pgrep(*args: str) -> list[str]:
    return subprocess.run(["pgrep", *args], capture_output=True, text=True).stdout.split()


def test_dev_stack_twice_leaves_one_of_each(stack_env):
    stack.start_stack()
    stack.start_stack()
    for daemon in ("munged", "mariadbd", "slurmdbd", "slurmctld"):
        assert len(_pgrep("-x", daemon)) == 1, daemon
    nodes = stack.nodes()
    assert len(nodes) >= 4 and {n.partition for n in nodes} == {"debug", "gpu"}
    assert len({n.gpu_type for n in nodes if n.gpu_type}) == 4  # T4, H100, MI300X, MIG
    for node in nodes:  # one slurmd and one exporter per node
        assert len(_pgrep("-f", f"slurmd -N {node.name}$")) == 1, node
        assert len(_pgrep("-f", f"bin/jobs-exporter --listen 127.0.0.1:{node.exporter_port} "
                                f"--node-name {node.name} ")) == 1, node
    listed = subprocess.run(["sinfo", "-N", "-h", "-o", "%N %P"], capture_output=True,
                            text=True, check=True).stdout.split("\n")
    assert sorted(filter(None, listed)) == sorted(
        f"{n.name} {n.partition}{'*' if n.partition == 'debug' else ''}" for n in nodes)
    # Match on our own config/ports: a benchmark may run a second Prometheus elsewhere.
    assert len(_pgrep("-f", "prometheus --config.file=.*var/prometheus/prometheus.yml")) == 1
    assert _pgrep("-f", "gunicorn --bind 127.0.0.1:8000")
    # Found by their pidfiles as the next start and `stop` look for them (the pid runs
    # under the daemon's name, scripts/lib/pidfile.sh; the sync loop names itself). Not
    # the exporters, which another module restarts.
    lib = stack.STACK_ROOT / "scripts" / "lib" / "pidfile.sh"
    for name in ("munged", "slurmctld", "prometheus", "web", "sync"):
        pidfile = stack.STACK_ROOT / "var" / "dev-stack" / f"{name}.pid"
        found = subprocess.run(["bash", "-c", f'. "{lib}"; alive "$1"', "alive", str(pidfile)])
        assert found.returncode == 0, f"{name}: {pidfile.read_text().strip()} not running as it"


@pytest.mark.parametrize(
    ("job_id", "code", "needle"),
    [
        ("abc", 2, "'abc'"),
        ("12;DROP", 2, "'12;DROP'"),
        ("99999999", 1, "99999999"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line(stack_env, job_id, code, needle):
    out = _show(job_id)
    assert out.returncode == code
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_db_setup_gives_up_soon_on_a_reader_holding_the_view_and_names_it(stack_env):
    """An open transaction that read the view holds its metadata lock: db-setup's CREATE
    OR REPLACE VIEW gives up after a few seconds, saying why, instead of stalling every
    reader behind it; once the reader is gone it goes through."""
    from mgmt.setup import LOCK_WAIT_SECONDS
    from webapp.sources.accounting import connect_from_url

    with closing(connect_from_url(stack_env["JOBREPORT_DB_URL"])) as conn:
        conn.autocommit(False)  # as a careless client holds it
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM jobs")
        t = time.monotonic()
        blocked = stack.jobreport("db-setup", "--cluster", "demo")
        took = time.monotonic() - t
    assert blocked.returncode != 0
    assert "SHOW PROCESSLIST" in blocked.stderr, blocked.stderr
    assert took < LOCK_WAIT_SECONDS + 30, took
    again = stack.jobreport("db-setup", "--cluster", "demo")
    assert again.returncode == 0, again.stderr
