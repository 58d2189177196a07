"""slurm-exporter settings, flags, --help, the README table and the deploy files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_exporter.__main__ import build_parser, settings_from
from slurm_exporter.settings import (
    SETTINGS_DOC,
    Settings,
    SettingsError,
    cluster_from_slurm_conf,
)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "slurm_exporter" / "README.md"
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent


def test_every_setting_is_documented():
    documented = set(re.findall(r"^\| `(JOBREPORT_SLURM_EXPORTER_[A-Z_]+)`", README.read_text(),
                                flags=re.M))
    assert documented == set(SETTINGS_DOC)


def test_settings_from_env_and_flags_override():
    env = {"JOBREPORT_SLURM_EXPORTER_POLL_LIMIT": "2.5", "JOBREPORT_SLURM_EXPORTER_SOURCES":
           "sinfo,squeue", "JOBREPORT_SLURM_EXPORTER_LISTEN": "[::1]:9999"}
    settings = Settings.from_env(env)
    assert (settings.poll_limit, settings.sources, settings.listen) == (
        2.5, ("sinfo", "squeue"), "[::1]:9999")
    args = build_parser().parse_args(["--poll-limit", "1", "--cluster", "x", "--sources", "sdiag"])
    changed = settings_from(args, settings)
    assert (changed.poll_limit, changed.cluster, changed.sources) == (1.0, "x", ("sdiag",))
    assert Settings.from_env({}).listen == "0.0.0.0:9089"


@pytest.mark.parametrize(("env", "name"), [
    ({"JOBREPORT_SLURM_EXPORTER_POLLLIMIT": "1"}, "JOBREPORT_SLURM_EXPORTER_POLLLIMIT"),
    ({"JOBREPORT_SLURM_EXPORTER_POLL_LIMIT": "0"}, "JOBREPORT_SLURM_EXPORTER_POLL_LIMIT"),
    ({"JOBREPORT_SLURM_EXPORTER_TIMEOUT": "ten"}, "JOBREPORT_SLURM_EXPORTER_TIMEOUT"),
    ({"JOBREPORT_SLURM_EXPORTER_SOURCES": "sinfo,scontrol"}, "JOBREPORT_SLURM_EXPORTER_SOURCES"),
    ({"JOBREPORT_SLURM_EXPORTER_LISTEN": "9089"}, "JOBREPORT_SLURM_EXPORTER_LISTEN"),
])
def test_bad_settings_fail_fast_with_their_name(env: dict[str, str], name: str):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env(env)


def test_cluster_name_comes_from_slurm_conf(tmp_path: Path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("# ClusterName=commented\nSlurmctldHost=h\nClusterName=alpha  # ours\n")
    assert cluster_from_slurm_conf({"SLURM_CONF": str(conf)}) == "alpha"
    conf.write_text("SlurmctldHost=h\n")
    with pytest.raises(SettingsError, match="JOBREPORT_SLURM_EXPORTER_CLUSTER"):
        cluster_from_slurm_conf({"SLURM_CONF": str(conf)})


def test_help_names_the_flags():
    run = subprocess.run([str(BIN / "slurm-exporter"), "--help"], capture_output=True,
                         text=True, check=True)
    for flag in ("--listen", "--poll-limit", "--timeout", "--once", "--constants"):
        assert flag in run.stdout


def test_a_bad_constants_file_is_a_usage_error(tmp_path: Path):
    bad = tmp_path / "c.toml"
    bad.write_text("[clusters.demo]\nstudent = 3\n")
    run = subprocess.run([str(BIN / "slurm-exporter"), "--once", "--cluster", "demo",
                          "--constants", str(bad)], capture_output=True, text=True)
    assert run.returncode == 2 and "student" in run.stderr


def _expand(name: str) -> list[str]:
    """``slurm_node_cpus_{alloc,idle}`` -> both names (the README's shorthand)."""
    match = re.search(r"\{([^{}]*)\}", name)
    if not match:
        return [name]
    return [n for part in match[1].split(",")
            for n in _expand(name[:match.start()] + part + name[match.end():])]


def _documented_metric_names() -> set[str]:
    tokens = re.findall(r"`(slurm_[a-z_{},]+)", README.read_text())
    return {n for token in tokens for n in _expand(token)}


def _emitted() -> set[str]:
    from tests.helpers.slurm_captures import exposition

    text = exposition("queue-pending", DEPLOY / "slurm-exporter-constants.toml")
    return set(re.findall(r"^# TYPE (\w+) ", text, flags=re.M))


def test_every_emitted_metric_is_documented():
    emitted = _emitted()
    assert len(emitted) > 60
    assert emitted <= _documented_metric_names(), emitted - _documented_metric_names()


def test_dashboard_queries_only_metrics_the_exporter_emits():
    emitted = _emitted()
    dash = json.loads((DEPLOY / "grafana-slurm-dashboard.json").read_text())
    used = {name for panel in dash["panels"] for target in panel["targets"]
            for name in re.findall(r"\b(slurm_[a-z_]+)", target["expr"])}
    assert used and used <= emitted, used - emitted
    assert "cluster" in [v["name"] for v in dash["templating"]["list"]]


def test_deploy_unit_and_scrape_job():
    unit = (DEPLOY / "slurm-exporter.service").read_text()
    assert re.search(r"^ExecStart=\S*slurm-exporter$", unit, re.M)
    scrape = (DEPLOY / "prometheus-slurm-exporter.yml").read_text()
    assert ":9089" in scrape and "scrape_interval: 30s" in scrape
    stack = (ROOT / "scripts" / "dev-stack").read_text()
    assert "bin/slurm-exporter" in stack and "$SLURM_EXPORTER_PORT" in stack
