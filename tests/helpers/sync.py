"""Support for the sync tests: many short real jobs (plain, array, het), a MariaDB
archive database of its own, runs of `jobreport sync` that may be killed."""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.helpers import stack
from tests.helpers.stack import ROOT
from webapp.model import Series, Usage
from webapp.settings import SETTINGS_DOC


def usage_figures(u: Usage) -> dict[str, object]:
    """A reading's fields that are not series, nor the step and PromQL of its read: what
    the sync's bulk read must give exactly as the job's own read gives it."""
    return {f.name: getattr(u, f.name) for f in dataclasses.fields(u)
            if f.name not in ("step_seconds", "queries")
            and Series.__name__ not in str(f.type)}


SHORT = ("-c1", "--mem=50M", "--time=2", "-o", "/dev/null")


def sbatch(user: str, *args: str) -> str:
    cmd = ["runuser", "-u", user, "--", "sbatch", "--parsable", "--chdir", f"/home/{user}",
           *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out.strip().split(";")[0]


def submit_short_jobs(plain: int) -> list[str]:
    """``plain`` one-second jobs and a 3-task array, all at once; the submitted ids (the
    array as its own id). No het job: its components cannot share this one node, so it
    would never start (het ids are covered by the accounting and sacct parsers' tests)."""
    ids = [sbatch("alice" if i % 2 else "bob", "-J", f"sync-{i}", *SHORT, "--wrap", "sleep 1")
           for i in range(plain)]
    ids.append(sbatch("alice", "-J", "sync-array", *SHORT, "--array=1-3", "--wrap", "sleep 1"))
    return ids


def known(env: dict[str, str]) -> dict[str, str]:
    """The stack's settings this checkout knows (a newer stack may write more)."""
    return {k: v for k, v in env.items() if k in SETTINGS_DOC}


def mail_env(stack_env: dict[str, str], tmp: Path, smtp_port: int) -> dict[str, str]:
    """The stack's settings with an archive and outbox of the test's own under ``tmp`` and
    mail to a loopback SMTP server: every owner at example.org, short jobs too, no daily
    cap (other suites' jobs of alice and bob ending in the same window would use it up;
    tests/stack/test_mail_policy.py tests the cap), no look-back before the streams'
    start."""
    return {**known(stack_env), "JOBREPORT_ARCHIVE_URL": str(tmp / "archive.sqlite"),
            "JOBREPORT_OUTBOX": str(tmp / "outbox.sqlite"),
            "JOBREPORT_SMTP_HOST": "127.0.0.1", "JOBREPORT_SMTP_PORT": str(smtp_port),
            "JOBREPORT_MAIL_MIN_RUNTIME": "0", "JOBREPORT_MAIL_TO": "{user}@example.org",
            "JOBREPORT_MAIL_DAILY_CAP": "0",
            # The streams start at the test's t0 (start_watermarks): a look-back would take
            # the hours before it, every other suite's jobs, which they never had to do
            # (the look-back itself: tests/test_sync_lookback.py, tests/vm/).
            "JOBREPORT_SYNC_LOOKBACK": "0"}


def start_watermarks(env: dict[str, str], t0: int) -> None:
    """Both sync streams start at ``t0`` (not last week: only the test's own jobs)."""
    from webapp.archive.store import Archive

    with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
        for stream in ("archive", "email"):
            archive.advance("demo", stream, t0)


# The command as installed, importing the checkout's code (PYTHONPATH beats the install).
JOBREPORT = str(Path(sys.executable).parent / "jobreport")


def own_jobs_ended(jobs: tuple[stack.StackJob, ...]) -> tuple[int, list[str]]:
    """Submit a module's own jobs and wait for their end: (a time just before their
    submission, their ids)."""
    t0 = int(time.time()) - 2
    ids = [stack.submit(job) for job in jobs]
    stack.wait_until_done(ids)
    return t0, ids


def reach_back(t0: float) -> int:
    """A first sync's ``--max-span`` (seconds) reaching back to ``t0`` (just before a
    module's own jobs) from now: read when the sync starts, since under load the commands
    run before it can take longer than a short job's whole run."""
    return int(time.time() - t0) + 1


def jobreport(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `jobreport ARGS` with exactly ``env``."""
    return subprocess.run([JOBREPORT, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def sync_past_stand_ins(env: dict[str, str], *args: str) -> str:
    """`jobreport sync ARGS`, run again while it stops at another suite's job that slurmdbd
    holds only as a stand-in record so far (the next run starts there); its output."""
    out = ""
    for _ in range(20):
        done = jobreport(env, "sync", *args)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        out += done.stdout
        if "stopped at" not in done.stdout:
            assert done.returncode == 0, done.stdout + done.stderr
            return out
        time.sleep(3)
    raise AssertionError(f"the sync kept stopping:\n{out}")


def all_done(ids: list[str]) -> bool:
    """Every job (every array task) in a final state; False while sacct cannot answer
    (slurmdbd reconnecting to a restarted MariaDB)."""
    try:
        current = stack.states(ids)
    except subprocess.CalledProcessError:
        return False
    return all(stack._done(j, current) for j in ids)


def root_mysql() -> Any:
    """Root's connection over the socket (PyMySQL, the `mariadb` extra: the stack tests')."""
    import pymysql

    return pymysql.connect(unix_socket="/run/mysqld/mysqld.sock", user="root", autocommit=True)


def create_mariadb_archive(name: str) -> str:
    """A fresh database and a user owning only it (as root over the socket): its URL."""
    password = secrets.token_hex(12)
    conn = root_mysql()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
            cur.execute("CREATE USER IF NOT EXISTS %s@'localhost' IDENTIFIED BY %s",
                        (name, password))
            cur.execute("ALTER USER %s@'localhost' IDENTIFIED BY %s", (name, password))
            cur.execute(f"GRANT ALL ON `{name}`.* TO %s@'localhost'", (name,))
    finally:
        conn.close()
    return f"mysql://{name}:{password}@localhost/{name}?unix_socket=/run/mysqld/mysqld.sock"


def drop_mariadb_archive(name: str) -> None:
    conn = root_mysql()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute("DROP USER IF EXISTS %s@'localhost'", (name,))
    finally:
        conn.close()


def run_sync(env: dict[str, str], *args: str, kill_after: float | None = None) -> int | None:
    """`jobreport sync ARGS`; SIGKILLed after ``kill_after`` seconds when given. The exit
    status, or None when it was killed."""
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "jobreport"), "sync", *args],
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=kill_after if kill_after is not None else 300)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        return None
    if proc.returncode not in (0, 1):
        raise AssertionError(f"jobreport sync failed ({proc.returncode}):\n{out}")
    return proc.returncode


def email_step(syncer, reports, job_ids, outbox, opt_outs) -> Counter:  # noqa: ANN001
    """The sync's email step for these jobs (as `jobreport sync --direction email` runs it
    once it has selected them), each from its report in ``reports``: the outcomes."""
    from webapp.mail.owner import submit_seconds
    from webapp.sources.ended import EndedJob
    from webapp.sync.options import SyncOptions
    from webapp.sync.run import SyncResult

    result = SyncResult(outcomes={"email": Counter()})
    for job_id in job_ids:
        report = reports[job_id]
        job = EndedJob(int(report.end_time.timestamp()), job_id, submit_seconds(report), "demo")
        syncer._process(job, ["email"], SyncOptions(direction="email"), outbox,  # noqa: SLF001
                        opt_outs, result)
    return result.outcomes["email"]
