"""The sync's deployment files: a oneshot unit started every minute (the one timer that
emails reports), and the optional EpilogSlurmctld nudge, which must never fail a job's
epilog nor make slurmctld wait."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import time
from pathlib import Path

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
EPILOG = DEPLOY / "slurm-epilogslurmctld-sync.sh"


def _unit(name: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string((DEPLOY / name).read_text())
    return unit


def test_timer_starts_the_oneshot_sync_every_minute():
    timer, service = _unit("jobreport-sync.timer"), _unit("jobreport-sync.service")
    assert timer["Timer"]["OnCalendar"] == "*-*-* *:*:00"
    assert service["Service"]["Type"] == "oneshot"
    assert " sync " in service["Service"]["ExecStart"]


def test_epilog_nudge_does_not_block_and_always_exits_0(tmp_path):
    text = EPILOG.read_text()
    # The unit is queued, not waited for (systemctl returns once the job is enqueued).
    assert "systemctl start --no-block jobreport-sync.service" in text
    # On a controller without systemd (no systemctl on PATH) it still exits 0 at once.
    sh = shutil.which("sh")
    t = time.monotonic()
    done = subprocess.run([sh, str(EPILOG)], env={"PATH": str(tmp_path)}, capture_output=True,
                          text=True, timeout=10, check=False)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert time.monotonic() - t < 2


def test_one_timer_emails_reports():
    # The sync is the one way reports are emailed: no unit runs the removed mail batch
    # (`jobreport email --ended-since`), and the sync's unit keeps its email direction.
    assert not list(DEPLOY.glob("jobreport-mail.*"))
    senders = [p.name for p in DEPLOY.glob("*.service")
               if " email" in _unit(p.name)["Service"].get("ExecStart", "")]
    assert senders == []
    assert "--direction both" in _unit("jobreport-sync.service")["Service"]["ExecStart"]
