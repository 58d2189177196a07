"""Hostile and broken input on the real stack: secrets stay out of messages, non-UTF-8
job names from Slurm render, the definer stays locked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest

from mgmt.setup import SetupError, apply
from tests.helpers import stack

SECRET = "s3cret-Pw"
JOBREPORT = Path(sys.executable).parent / "jobreport"
LATIN1_NAME = stack.LATIN1_NAME


def _jobreport(stack_env: dict[str, str], *argv: str, **env: str):
    return subprocess.run([str(JOBREPORT), *argv], env={**os.environ, **stack_env, **env},
                          capture_output=True, timeout=300)


def test_prometheus_credentials_in_the_url_are_refused_without_echo(stack_env, stack_jobs):
    # Credentials belong in JOBREPORT_PROMETHEUS_USER/_PASSWORD_FILE: a URL holding them is
    # refused, and the refusal does not repeat the password.
    run = _jobreport(stack_env, "show", stack_jobs["busy"],
                     JOBREPORT_PROMETHEUS_URL=f"http://reader:{SECRET}@127.0.0.1:9/")
    err = run.stderr.decode()
    assert run.returncode == 1 and "JOBREPORT_PROMETHEUS_USER" in err
    assert SECRET not in err + run.stdout.decode()


@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_prometheus_outage_messages_hide_credentials(stack_env, stack_jobs, fmt):
    # Whatever reaches a Prometheus source (a proxy URL with a token, say), an outage
    # reported in the report never shows it.
    from webapp.renderers import html, text
    from webapp.renderers import json as json_renderer
    from webapp.report.service import ReportService
    from webapp.settings import Settings
    from webapp.sources.prometheus import PrometheusSource

    settings = Settings.from_env(stack_env)
    source = PrometheusSource(f"http://reader:{SECRET}@127.0.0.1:9", timeout=2)
    report = ReportService(settings, prometheus=source).build(stack_jobs["busy"])
    out = {"text": text, "json": json_renderer, "html": html}[fmt].render(report)
    assert SECRET not in out and "reader:***@127.0.0.1:9" in out
    assert any(g.source == "prometheus" for g in report.gaps)


def test_db_setup_error_hides_the_password(stack_env):  # needs the stack's MariaDB
    # MariaDB refuses a statement that carries a password: the message names the
    # statement without it.
    statement = f"CREATE USER 'jr_probe'@'localhost' IDENTIFIED BY '{SECRET}' REQUIRE BOGUS"
    with pytest.raises(SetupError) as err:
        apply([statement], "/run/mysqld/mysqld.sock", "root")
    assert SECRET not in str(err.value)
    assert "IDENTIFIED BY '***'" in str(err.value) and "failed" in str(err.value)


def test_definer_account_is_locked_even_when_it_already_existed(stack_env):
    conn = pymysql.connect(unix_socket="/run/mysqld/mysqld.sock", user="root")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT user FROM mysql.user WHERE user LIKE 'jobreport%definer%'")
            definers = [r[0] for r in cur.fetchall()]
            assert definers
            for user in definers:
                cur.execute("ALTER USER %s@'localhost' ACCOUNT UNLOCK", (user,))
        run = _jobreport(stack_env, "db-setup", "--cluster", stack_env["JOBREPORT_CLUSTER"])
        assert run.returncode == 0, run.stderr.decode()
        with conn.cursor() as cur:
            for user in definers:
                cur.execute("SHOW CREATE USER %s@'localhost'", (user,))
                assert "ACCOUNT LOCK" in cur.fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def latin1_jobs(stack_jobs: dict[str, str]) -> dict[str, str]:
    """A plain job and a 2-task array of the session batch, both named with a byte that is
    not UTF-8."""
    return {"job": stack_jobs["latin1-job"], "array": stack_jobs["latin1-array"]}


@pytest.mark.parametrize("kind", ["job", "array"])
def test_non_utf8_job_name_renders(stack_env, latin1_jobs, kind):
    job = latin1_jobs[kind]
    for fmt in ("text", "json", "html"):
        run = _jobreport(stack_env, "show", job, "--format", fmt)
        assert run.returncode == 0, run.stderr.decode()[-2000:]
        # The accounting view (which the name comes from) stores "?" for the byte.
        assert "caf?-latin1" in run.stdout.decode()


def test_non_utf8_job_name_through_sacct(stack_env, latin1_jobs):
    # Slurm 22.05 with MariaDB stores "?" for the byte; the array's tasks all parse.
    from webapp.settings import Settings
    from webapp.sources.sacct import SacctSource

    s = Settings.from_env(stack_env)
    source = SacctSource(s.sacct, timeout=s.sacct_timeout, cluster=s.cluster)
    assert source.job(latin1_jobs["job"]).job_name == "caf?-latin1"
    tasks = source.array(latin1_jobs["array"])
    assert [t.job_name for t in tasks] == ["caf?-latin1"] * 2
