"""Cross-part contracts: documented settings, queried metrics, id parsing, the CLI."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobs_exporter.settings import SETTINGS_DOC as EXPORTER_DOC
from jobs_exporter.settings import Settings as ExporterSettings
from slurm_exporter.settings import SETTINGS_DOC as SLURM_EXPORTER_DOC
from slurm_exporter.settings import Settings as SlurmExporterSettings
from tests.helpers.metric_names import (
    FIELD,
    emitted_names,
    matches,
    names_in,
    python_strings,
    referenced_names,
)
from webapp.cli import COMMANDS, build_parser
from webapp.model import InvalidJobId, JobId
from webapp.settings import SETTINGS_DOC, Settings, SettingsError
from webapp.thresholds import Thresholds

ROOT = Path(__file__).resolve().parent.parent


def test_readme_settings_tables_are_generated_from_the_settings_modules():
    # Names, defaults and meanings: scripts/settings-table --write regenerates them.
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "settings-table")],
                         capture_output=True, text=True, check=True).stdout
    generated = dict(re.findall(r"<!-- settings:(\w+) -->\n(.*?)\n(?=<!--|\Z)", out, re.S))
    tables = {"webapp": "docs/settings.md", "thresholds": "docs/settings.md",
              "exporter": "jobs_exporter/README.md",
              "slurm_exporter": "slurm_exporter/README.md"}
    assert set(generated) == set(tables)
    for name, rel in tables.items():
        text = (ROOT / rel).read_text()
        held = re.search(rf"<!-- settings:{name} -->\n(.*?)<!-- /settings:{name} -->", text, re.S)
        assert held and held.group(1) == generated[name], f"{rel}: scripts/settings-table --write"


DERIVED = {"privileged", "cluster_overrides"}  # fields that are no setting: computed by from_env


@pytest.mark.parametrize(("cls", "prefix", "doc"), [
    (Settings, "JOBREPORT_", SETTINGS_DOC),
    (ExporterSettings, "JOBREPORT_EXPORTER_", EXPORTER_DOC),
    (SlurmExporterSettings, "JOBREPORT_SLURM_EXPORTER_", SLURM_EXPORTER_DOC),
])
def test_every_field_is_a_documented_setting_whose_text_is_its_default(cls, prefix, doc):
    # A field added without its declaration would be missing from the table: caught here.
    fields = {prefix + f.name.upper() for f in dataclasses.fields(cls)} - {
        prefix + d.upper() for d in DERIVED}
    assert fields == set(doc) - {"JOBREPORT_CONFIG"}
    # The documented text, given in the environment, yields what an unset variable does.
    stated = {k: default for k, (default, _) in doc.items() if k != "JOBREPORT_CONFIG"}
    assert cls.from_env(stated) == cls.from_env({}) == cls()


@pytest.mark.parametrize(("variable", "field", "value"), [
    # What operators rely on, written here independently of the settings modules.
    ("JOBREPORT_SMTP_PORT", "smtp_port", 25),
    ("JOBREPORT_BIND", "bind", "127.0.0.1:8000"),
    ("JOBREPORT_SESSION_COOKIE_SECURE", "session_cookie_secure", True),
    ("JOBREPORT_AUTH", "auth", "password"),
    ("JOBREPORT_MIN_COVERAGE", "min_coverage", 0.8),
    ("JOBREPORT_STAFF", "staff", frozenset()),
    ("JOBREPORT_MAIL_MIN_SEVERITY", "mail_min_severity", "info"),
])
def test_documented_defaults_are_the_behaviour(variable, field, value):
    assert getattr(Settings.from_env({}), field) == value
    default, _ = SETTINGS_DOC[variable]
    assert getattr(Settings.from_env({variable: default}), field) == value


def test_documented_exporter_defaults_are_the_behaviour():
    assert ExporterSettings.from_env({}).listen == EXPORTER_DOC["JOBREPORT_EXPORTER_LISTEN"][0] \
        == "0.0.0.0:9306"
    assert SlurmExporterSettings.from_env({}).poll_limit == 10.0
    assert SlurmExporterSettings.from_env({}).listen == "0.0.0.0:9089"
    assert Thresholds().cpu_efficiency_low == 0.65 and Thresholds().gpu_idle == 0.01


def test_unknown_setting_fails_fast_with_its_name():
    with pytest.raises(SettingsError, match="JOBREPORT_CLUSTR"):
        Settings.from_env({"JOBREPORT_CLUSTR": "x"})
    with pytest.raises(SettingsError, match="JOBREPORT_SMTP_PORT"):
        Settings.from_env({"JOBREPORT_SMTP_PORT": "smtp"})


def test_every_metric_the_app_and_the_dashboards_name_is_one_an_exporter_emits():
    emitted = emitted_names()
    referenced = referenced_names()
    # Every form is seen: PromQL selectors and range vectors, bare names in tuples, names
    # composed in f-strings, prose in the report's coverage notes, both dashboards.
    assert {"jobs_gpu_utilization_ratio", "jobs_read_bytes_total", "slurm_partition_cpus",
            f"slurm_{FIELD}_{FIELD}_alloc", "jobs_*_syscalls_total"} <= set(referenced)
    assert "deploy/grafana-slurm-dashboard.json" in referenced["slurm_gpus"]
    unknown = {name: sorted(files) for name, files in referenced.items()
               if not matches(name, emitted)}
    assert not unknown, unknown


@pytest.mark.parametrize(("text", "names"), [
    ("max_over_time(jobs_gpu_utilization_ratio[5m])", {"jobs_gpu_utilization_ratio"}),
    ('{__name__="jobs_cpus"} or {__name__=~"jobs_gpu_.*"}', {"jobs_cpus", "jobs_gpu_*"}),
    ("sum(slurm_partition_cpus{{{sel}}}) / slurm_up", {"slurm_partition_cpus", "slurm_up"}),
    ("jobs_*_bytes_total, jobs_scratch_in_use", {"jobs_*_bytes_total", "jobs_scratch_in_use"}),
    ("os.jobs_x, my_jobs_y, subjobs_z", set()),
])
def test_metric_names_are_found_in_every_form(text: str, names: set[str]):
    assert names_in(text) == names


def test_fields_inside_a_name_are_wildcards_and_after_it_a_selector():
    source = ('q = f"sum(slurm_{who}_jobs{{{sel}}})"\n'
              't = "rate(jobs_cpu_seconds_total{{{sel}}}[{rate}])"  # jobs_info too\n'
              's = \'jobs_memory_events_total{event="high"}\'\n')
    found = set().union(*map(names_in, python_strings(source)))
    assert found == {f"slurm_{FIELD}_jobs", "jobs_cpu_seconds_total", "jobs_info",
                     "jobs_memory_events_total"}
    assert matches(f"slurm_{FIELD}_jobs", {"slurm_user_jobs"})
    assert not matches(f"slurm_{FIELD}_jobs", {"slurm_jobs"})
    assert not matches("jobs_*_bytes_total", {"jobs_read_bytes"})


def test_units_end_metric_names():
    # Prometheus's convention, which promtool does not check: the base unit last, then
    # _total on a counter (slurm_user_memory_alloc_bytes, not ..._memory_bytes_alloc).
    misplaced = {n for n in emitted_names()
                 if re.search(r"_(bytes|seconds|watts|ratio)_(?!total$)", n)}
    assert not misplaced, misplaced


@pytest.mark.parametrize(("text", "expected"), [
    ("123", JobId(123)),
    ("123_4", JobId(123, array_task=4)),
    ("123+1", JobId(123, het_offset=1)),
    (" 42 ", JobId(42)),
])
def test_job_ids_accepted(text, expected):
    assert JobId.parse(text) == expected
    assert str(JobId.parse(text)) == text.strip()


@pytest.mark.parametrize("text", ["", "abc", "12a", "1_2_3", "1+", "-1", "1;drop", "1 2",
                                  "12345678901", "1_[1-3]"])
def test_job_ids_refused(text):
    with pytest.raises(InvalidJobId):
        JobId.parse(text)


def test_every_command_has_help(capsys):
    parser = build_parser()
    names = [c.name for c in COMMANDS]
    assert {"jobs", "show", "history", "serve", "email", "outbox", "db-setup"} <= set(names)
    assert len(names) == len(set(names))
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args([command.name, "--help"])
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert "usage: jobreport " + command.name in out
        assert " ".join(command.description.replace("%%", "%").split()[:4]) in " ".join(out.split())
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--help"])
    top = capsys.readouterr().out
    assert all(c.name in top for c in COMMANDS)


def test_db_setup_sql_has_one_branch_per_cluster_and_no_secrets():
    from mgmt.setup import build_statements

    stmts = build_statements(["demo", "other"], "pw'; DROP", ["localhost"], "slurm_acct_db")
    view = next(s for s in stmts if "VIEW jobreport.jobs" in s)
    assert view.count("UNION ALL") == 1
    assert "`demo_job_table`" in view and "`other_job_table`" in view
    joined = "\n".join(stmts)
    assert "job_script" not in joined and "job_env" not in joined
    assert "'pw\\'; DROP'" in joined  # the password is quoted, not spliced
    with pytest.raises(ValueError, match="cluster name"):
        build_statements(["demo`; DROP"], "pw", ["localhost"], "slurm_acct_db")


def test_db_setup_errors_are_one_line(capsys):
    from webapp.cli import main

    assert main(["db-setup", "--cluster", "demo", "--admin-socket", "/nonexistent/sock"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot connect to MariaDB at /nonexistent/sock" in err[0]


def test_db_setup_print_hides_the_password(capsys, monkeypatch):
    from webapp.cli import main

    monkeypatch.setenv("JOBREPORT_DB_URL", "mysql://jobreport:s3cret@127.0.0.1/jobreport")
    assert main(["db-setup", "--cluster", "demo", "--print"]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out and "IDENTIFIED BY '<password>'" in out
