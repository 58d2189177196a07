"""The account report on the stack: its CPU-hours allocated of account research from the
first of this month to a window end are what ``sacct -a -X -T -A research`` adds up in
CPUTimeRAW over the same window (within 1 %), a job running across the window's end (the
session's ``busy``, the window ending halfway through it) included, both from the
stack's archive and from the accounting view alone; and carol, research's Slurm
coordinator (scripts/dev-stack), sees its page where alice does not."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime

import pytest

from tests.helpers import stack
from tests.helpers.web import make_client, password_settings
from webapp.sources.coordinators import Coordinators

pytestmark = pytest.mark.stack


def _sacct_cpu_hours(since: datetime, until: datetime) -> float:
    out = subprocess.run(
        ["sacct", "-a", "-X", "-T", "-n", "-P", "-A", "research", "-S",
         since.strftime("%Y-%m-%dT%H:%M:%S"), "-E", until.strftime("%Y-%m-%dT%H:%M:%S"),
         "-o", "CPUTimeRAW"], capture_output=True, text=True, check=True, timeout=120,
        env={"TZ": "UTC", "PATH": "/usr/bin:/bin"}).stdout
    return sum(int(v) for v in out.split() if v.isdigit()) / 3600.0


@pytest.fixture(scope="module")
def window_end(stack_jobs) -> datetime:
    """Halfway through alice's session job ``busy`` (account research): a job straddles
    the window's end, which sacct -T cuts. An ended job: no wait behind the queue."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", stack_jobs["busy"], "-o",
                          "Account,Start,End"], capture_output=True, text=True, check=True,
                         timeout=120, env={"SLURM_TIME_FORMAT": "%s", "PATH": "/usr/bin:/bin"})
    account, start, end = out.stdout.split()[0].split("|")
    assert account == "research" and int(end) - int(start) >= 10, out.stdout
    return datetime.fromtimestamp((int(start) + int(end)) // 2, UTC)


def _report(env: dict[str, str], since: datetime, until: datetime) -> dict:
    done = stack.jobreport("account-report", "--account", "research", "--since",
                           since.strftime("%Y-%m-%dT%H:%M:%S"), "--until",
                           until.strftime("%Y-%m-%dT%H:%M:%S"), "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("archive", ["stack's", "empty"])
def test_cpu_hours_are_sacct_cputimeraw_within_1_percent(stack_env, window_end, archive):
    env = {**stack.load_env(), "TZ": "UTC"} if archive == "stack's" else stack_env
    until = window_end
    since = until.replace(day=1, hour=0, minute=0, second=0)
    got = _report(env, since, until)
    want = _sacct_cpu_hours(since, until)
    assert want > 0
    assert got["totals"]["cpu_hours"] == pytest.approx(want, rel=0.01)
    if archive == "empty":  # every job from the accounting view, and said so
        assert got["from_accounting"] == got["totals"]["jobs"] > 0
    assert "carol" in got["coordinators"]


def test_the_coordinator_sees_the_accounts_page(stack_env, tmp_path):
    sacctmgr = stack.load_env().get("JOBREPORT_SACCTMGR", "sacctmgr")
    assert "carol" in Coordinators(sacctmgr).of("research")
    settings = password_settings(tmp_path, sacctmgr=sacctmgr)
    assert make_client(settings, user="carol").get("/accounts/research").status_code == 200
    assert make_client(settings, user="carol").get("/accounts/teaching").status_code == 403
    assert make_client(settings, user="alice").get("/accounts/research").status_code == 403
