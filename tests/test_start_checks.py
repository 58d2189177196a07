"""Every deployable parses its settings, thresholds and policy files when it starts: one
bad value stops the start (non-zero exit, the variable's name on stderr), never a page or
a run that fails later."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from webapp.settings import SettingsError

ROOT = Path(__file__).resolve().parent.parent
CLI = "import sys; from webapp.cli import main; sys.exit(main())"


def start(argv: list[str], bad: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` run from the checkout with no JOBREPORT_* but ``bad`` (and no config file)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    env.update({"JOBREPORT_CONFIG": "", **bad})
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("argv", "bad", "named"), [
    (["-c", CLI, "serve"], {"JOBREPORT_THRESHOLDS": "cpu_eff=abc"},
     "JOBREPORT_THRESHOLDS: unknown name 'cpu_eff'"),
    (["-c", CLI, "serve"], {"JOBREPORT_THRESHOLDS": "cpu_efficiency_low=abc"},
     "JOBREPORT_THRESHOLDS: cpu_efficiency_low='abc' is not a number >= 0"),
    (["-c", CLI, "sync", "--dry-run"], {"JOBREPORT_STAFF_REPORT": "days=-1"},
     "JOBREPORT_STAFF_REPORT: days='-1' is not a number > 0 and <= 366"),
    (["-c", CLI, "watch", "--dry-run"], {"JOBREPORT_THRESHOLDS": "gpu_idle_seconds=1h"},
     "JOBREPORT_THRESHOLDS: gpu_idle_seconds='1h'"),
    (["-c", CLI, "watch", "--dry-run"], {"JOBREPORT_WATCH": "gpu_idle_seconds=60"},
     "JOBREPORT_WATCH: its names are now set in JOBREPORT_THRESHOLDS"),
    (["-c", CLI, "staff-report"], {"JOBREPORT_MIN_COVERAGE": "2"},
     "JOBREPORT_MIN_COVERAGE='2' is not a number from 0 to 1"),
    (["-c", CLI, "serve"], {"JOBREPORT_SESSION_COOKIE_SECURE": "maybe"},
     "JOBREPORT_SESSION_COOKIE_SECURE='maybe' is not a boolean: use 1/0, true/false, "
     "yes/no or on/off"),
    (["-m", "jobs_exporter", "--once"], {"JOBREPORT_EXPORTER_FD_CACHE": "maybe"},
     "JOBREPORT_EXPORTER_FD_CACHE='maybe' is not a boolean"),
    (["-m", "jobs_exporter", "--once"], {"JOBREPORT_EXPORTER_BMC_INTERVAL": "0"},
     "JOBREPORT_EXPORTER_BMC_INTERVAL='0' is not a number from 1 to 3600"),
    (["-m", "jobs_exporter", "--once"], {"JOBREPORT_EXPORTER_SCRAPE_BUDGET": "soon"},
     "JOBREPORT_EXPORTER_SCRAPE_BUDGET='soon'"),
    (["-m", "slurm_exporter", "--once"], {"JOBREPORT_SLURM_EXPORTER_POLL_LIMIT": "often"},
     "JOBREPORT_SLURM_EXPORTER_POLL_LIMIT='often' is not a number"),
    (["-m", "slurm_exporter", "--once"], {"JOBREPORT_SLURM_EXPORTER_TIMEOUT": "0"},
     "JOBREPORT_SLURM_EXPORTER_TIMEOUT='0' is not a number > 0"),
])
def test_a_bad_setting_stops_the_start_naming_it(argv, bad, named):
    proc = start(argv, bad)
    assert proc.returncode != 0 and named in proc.stderr, proc.stderr
    assert proc.stdout == ""  # nothing ran


def test_a_bad_watch_policy_stops_watch_at_start(tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[[cancel]]\nrule = "gpu_idel"\npartitions = ["gpu"]\n')
    proc = start(["-c", CLI, "watch", "--dry-run"], {"JOBREPORT_WATCH_POLICY": str(policy)})
    assert proc.returncode != 0, proc.stderr
    assert f"JOBREPORT_WATCH_POLICY='{policy}'" in proc.stderr and "gpu_idel" in proc.stderr


def test_the_web_app_factory_refuses_to_build(monkeypatch):
    from webapp.web.app import create_app

    monkeypatch.setenv("JOBREPORT_THRESHOLDS", "cpu_eff=abc")
    with pytest.raises(SettingsError, match="JOBREPORT_THRESHOLDS: unknown name 'cpu_eff'"):
        create_app()
