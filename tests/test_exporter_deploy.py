"""deploy/: prolog/epilog GPU files, the Grafana dashboard's metrics, the scrape config."""

from __future__ import annotations

import json
import os
import re
import subprocess

from tests.helpers.exporter_scrape import GOLDEN, ROOT

DEPLOY = ROOT / "deploy"


def _run(script: str, tmp_path, **env: str) -> None:
    full = {"PATH": os.environ["PATH"], "JOBREPORT_EXPORTER_GPU_ALLOC_DIR": str(tmp_path), **env}
    subprocess.run(["sh", str(DEPLOY / script)], env=full, check=True)


def test_prolog_writes_and_epilog_removes_allocation(tmp_path):
    _run("slurm-prolog-gpus.sh", tmp_path, SLURM_JOB_ID="42", SLURM_JOB_GPUS="0,1")
    assert (tmp_path / "42").read_text() == "0,1\n"
    assert sorted(os.listdir(tmp_path)) == ["42"]  # no temporary file left
    _run("slurm-epilog-gpus.sh", tmp_path, SLURM_JOB_ID="42")
    assert os.listdir(tmp_path) == []


def test_prolog_ignores_jobs_without_gpus_and_odd_values(tmp_path):
    _run("slurm-prolog-gpus.sh", tmp_path, SLURM_JOB_ID="43")
    _run("slurm-prolog-gpus.sh", tmp_path, SLURM_JOB_ID="../44", SLURM_JOB_GPUS="0")
    _run("slurm-prolog-gpus.sh", tmp_path, SLURM_JOB_ID="45", SLURM_JOB_GPUS="0;rm -rf /")
    assert os.listdir(tmp_path) == []


def _exported_families() -> set[str]:
    names = set()
    for golden in GOLDEN.glob("*.prom"):
        names.update(re.findall(r"^# TYPE (\S+)", golden.read_text(), re.M))
    return names


def test_dashboard_uses_only_exported_metrics_and_has_jobid_variable():
    dash = json.loads((DEPLOY / "grafana-jobs-dashboard.json").read_text())
    assert "jobid" in [v["name"] for v in dash["templating"]["list"]]
    exported = _exported_families()
    used = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            used.update(re.findall(r"\b(jobs_[a-z_]+)", target["expr"]))
    assert used <= exported, used - exported


def test_scrape_config_every_30s_on_9306():
    text = (DEPLOY / "prometheus-jobs-exporter.yml").read_text()
    assert "scrape_interval: 30s" in text and ":9306" in text


def test_systemd_unit_runs_the_console_script():
    text = (DEPLOY / "jobs-exporter.service").read_text()
    assert re.search(r"^ExecStart=\S*jobs-exporter", text, re.M)
    assert "LimitNOFILE=" in text
