"""Per-cluster settings: ``JOBREPORT_CLUSTER_SETTINGS_DIR/<name>.conf`` for a cluster of
JOBREPORT_CLUSTERS replaces the main settings for that cluster alone, and only the
per-cluster keys (``CLUSTER_SETTINGS``); anything else stops the start naming the file
and the variable. `jobreport show --cluster NAME` reads that cluster's sources."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from webapp.cli import main
from webapp.settings import (
    CLUSTER_SETTINGS,
    SETTINGS_DOC,
    Settings,
    SettingsError,
    caller_env,
    env_name,
)

CAPTURES = Path(__file__).parent.parent / "fixtures" / "slurmrestd"


def settings(folder: Path, files: dict[str, str], mode: int = 0o644, **env: str) -> Settings:
    """The settings of a deployment serving ``demo``, ``v24`` and ``v26``, with the
    cluster files ``files`` (name -> text) in ``folder``, of mode ``mode``."""
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / f"{name}.conf").write_text(text)
        (folder / f"{name}.conf").chmod(mode)
    return Settings.from_env({
        "JOBREPORT_CONFIG": "", "JOBREPORT_CLUSTER": "demo",
        "JOBREPORT_CLUSTERS": "v24,v26=http://prom-v26:9090",
        "JOBREPORT_CLUSTER_SETTINGS_DIR": str(folder), **env})


def test_a_clusters_file_replaces_its_settings_and_no_others(tmp_path):
    s = settings(tmp_path / "clusters", {"v24": """# the VM cluster v24
JOBREPORT_PROMETHEUS_URL=http://127.0.0.1:9090/
JOBREPORT_PROMETHEUS_CLUSTER_LABEL=cluster
JOBREPORT_SACCT_SOURCE=slurmrestd
JOBREPORT_SLURMRESTD_URL="http://10.0.24.2:6820"
JOBREPORT_SACCT_TIMEOUT=5
export JOBREPORT_SACCT=/opt/v24/bin/sacct
"""})
    v24 = s.for_cluster("v24")
    assert (v24.cluster, v24.prometheus_url, v24.prometheus_cluster_label) == (
        "v24", "http://127.0.0.1:9090", "cluster")  # parsed as the main setting is: no "/"
    assert (v24.sacct_source, v24.slurmrestd_url, v24.sacct_timeout, v24.sacct) == (
        "slurmrestd", "http://10.0.24.2:6820", 5.0, "/opt/v24/bin/sacct")
    # Everything the file leaves out is the main settings'.
    assert dataclasses.replace(v24, cluster="demo", prometheus_url=s.prometheus_url,
                               prometheus_cluster_label="", sacct_source="sacct",
                               slurmrestd_url=s.slurmrestd_url, sacct_timeout=s.sacct_timeout,
                               sacct=s.sacct) == s
    # The main cluster and a cluster without a file: as without the directory.
    assert s.for_cluster("demo") is s
    assert s.sacct_source == "sacct" and s.prometheus_cluster_label == ""
    assert s.for_cluster("v26") == dataclasses.replace(
        s, cluster="v26", prometheus_url="http://prom-v26:9090")


def test_every_per_cluster_key_goes_through_the_main_settings_parser(tmp_path):
    # Each key at its documented default text: the value the main settings hold for it.
    text = "".join(f"{env_name(f)}={SETTINGS_DOC[env_name(f)][0]}\n" for f in CLUSTER_SETTINGS)
    # The default JOBREPORT_DB_URL holds a password: a file others may read is refused.
    s = settings(tmp_path / "clusters", {"v24": text}, mode=0o600)
    v24 = s.for_cluster("v24")
    assert {f: getattr(v24, f) for f in CLUSTER_SETTINGS} == {
        f: getattr(Settings(), f) for f in CLUSTER_SETTINGS}
    assert set(s.cluster_overrides["v24"]) >= set(CLUSTER_SETTINGS)


@pytest.mark.parametrize("key", ["JOBREPORT_STAFF", "JOBREPORT_CLUSTER", "JOBREPORT_CLUSTERS",
                                 "JOBREPORT_MAIL_FROM", "JOBREPORT_THRESHOLDS",
                                 "JOBREPORT_CONFIG", "JOBREPORT_CLUSTER_SETTINGS_DIR",
                                 "JOBREPORT_EXPORTER_LISTEN"])
def test_a_setting_that_is_not_per_cluster_is_refused(tmp_path, key):
    path = tmp_path / "clusters" / "v24.conf"
    with pytest.raises(SettingsError, match=rf"{path}: {key} is not a per-cluster setting"):
        settings(tmp_path / "clusters", {"v24": f"JOBREPORT_SACCT=sacct\n{key}=x\n"})


def test_an_unknown_setting_is_refused(tmp_path):
    path = tmp_path / "clusters" / "v26.conf"
    with pytest.raises(SettingsError, match=rf"{path}: unknown setting JOBREPORT_SACT$"):
        settings(tmp_path / "clusters", {"v26": "JOBREPORT_SACT=/opt/sacct\n"})


@pytest.mark.parametrize(("line", "message"), [
    ("JOBREPORT_SACCT_TIMEOUT=soon", "JOBREPORT_SACCT_TIMEOUT='soon' is not a number"),
    ("JOBREPORT_SACCT_SOURCE=squeue", "JOBREPORT_SACCT_SOURCE='squeue': use sacct or slurmrestd"),
    ("JOBREPORT_PROMETHEUS_CLUSTER_LABEL=clu-ster", "JOBREPORT_PROMETHEUS_CLUSTER_LABEL="),
    ("JOBREPORT_PROMETHEUS_URL=http://u:p@prom:9090", "JOBREPORT_PROMETHEUS_URL holds credentials"),
    ("JOBREPORT_ADMIN_COMMENT=database", "JOBREPORT_ADMIN_COMMENT=database needs"),
    ("JOBREPORT_DB_URL=mysql://jobreport@db-v24/jobreport\n"
     "JOBREPORT_DB_PASSWORD_FILE=/nonexistent/pw", "JOBREPORT_DB_PASSWORD_FILE="),
    ("JOBREPORT_SCONTROL", r"v24\.conf:1: expected JOBREPORT_NAME=value"),
])
def test_a_bad_value_stops_the_start_naming_the_file_and_the_variable(tmp_path, line, message):
    with pytest.raises(SettingsError) as err:
        settings(tmp_path / "clusters", {"v24": line + "\n"})
    assert str(tmp_path / "clusters" / "v24.conf") in str(err.value)
    assert re.search(message, str(err.value)), str(err.value)


def test_files_of_clusters_not_served_here_and_of_the_main_one_are_not_read(tmp_path):
    s = settings(tmp_path / "clusters", {"other": "JOBREPORT_STAFF=mallory\n",
                                         "demo": "JOBREPORT_SACCT_SOURCE=slurmrestd\n"},
                 JOBREPORT_CLUSTERS="demo,v24")
    assert s.cluster_overrides == {} and s.for_cluster("demo") is s
    assert s.sacct_source == "sacct"


def test_a_missing_directory_is_refused_and_an_empty_setting_reads_none(tmp_path):
    with pytest.raises(SettingsError, match="JOBREPORT_CLUSTER_SETTINGS_DIR=.*no such directory"):
        Settings.from_env({"JOBREPORT_CLUSTERS": "v24",
                           "JOBREPORT_CLUSTER_SETTINGS_DIR": str(tmp_path / "absent")})
    assert Settings.from_env({"JOBREPORT_CLUSTERS": "v24"}).cluster_overrides == {}


def test_a_clusters_database_password_comes_from_its_own_file(tmp_path):
    (tmp_path / "pw-v24").write_text("s3cret/v24\n")
    s = settings(tmp_path / "clusters", {"v24": (
        "JOBREPORT_DB_URL=mysql://jobreport@db-v24:3306/jobreport\n"
        f"JOBREPORT_DB_PASSWORD_FILE={tmp_path / 'pw-v24'}\n")})
    assert s.for_cluster("v24").db_url == "mysql://jobreport:s3cret%2Fv24@db-v24:3306/jobreport"
    assert s.db_url == Settings().db_url and s.for_cluster("v26").db_url == s.db_url


def test_the_directory_is_the_system_config_files_alone_for_a_caller_not_root(tmp_path):
    system = tmp_path / "jobreport.conf"
    system.write_text("JOBREPORT_CLUSTER_SETTINGS_DIR=/etc/jobreport/clusters\n")
    env = {"JOBREPORT_CLUSTER_SETTINGS_DIR": str(tmp_path / "mine")}
    got = caller_env(env, str(system), uid=1000)
    assert got["JOBREPORT_CLUSTER_SETTINGS_DIR"] == "/etc/jobreport/clusters"
    assert caller_env(env, str(system), uid=0)["JOBREPORT_CLUSTER_SETTINGS_DIR"] == env[
        "JOBREPORT_CLUSTER_SETTINGS_DIR"]


# -- `jobreport show --cluster`: that cluster's sources ----------------------------------
class Restd(BaseHTTPRequestHandler):
    """slurmrestd answering from the captures (fixtures/slurmrestd); records each path."""

    paths: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.paths.append(self.path)
        job = self.path.split("/job/")[-1].split("?")[0]
        capture = CAPTURES / f"dbv0.0.38_job_{job}.json"
        if self.path == "/openapi/v3":  # the source asks which API versions it serves
            body = gzip.decompress((CAPTURES / "openapi-v3-slurm-22.05.8.json.gz").read_bytes())
        else:
            body = capture.read_bytes() if capture.exists() else json.dumps(
                {"errors": [{"error_number": 9003, "error": "Nothing found with query"}],
                 "jobs": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def restd() -> Iterator[tuple[str, list[str]]]:
    Restd.paths = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Restd)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Restd.paths
    finally:
        server.shutdown()
        server.server_close()


def test_jobreport_show_cluster_reads_that_clusters_sources(tmp_path, monkeypatch, capsys,
                                                            restd):
    url, paths = restd
    folder = tmp_path / "clusters"
    folder.mkdir()
    (folder / "v24.conf").write_text(
        "JOBREPORT_SACCT_SOURCE=slurmrestd\n"
        f"JOBREPORT_SLURMRESTD_URL={url}\n"
        "JOBREPORT_DB_URL=mysql://jobreport@127.0.0.1:9/jobreport\n")
    for key in [k for k in os.environ if k.startswith("JOBREPORT_")]:
        monkeypatch.delenv(key)
    for key, value in {
        "JOBREPORT_CONFIG": "", "JOBREPORT_CLUSTER": "demo", "JOBREPORT_CLUSTERS": "v24",
        "JOBREPORT_CLUSTER_SETTINGS_DIR": str(folder),
        # Nothing of the main cluster answers: no database, no sacct, no Prometheus.
        "JOBREPORT_DB_URL": "mysql://jobreport@127.0.0.1:9/jobreport",
        "JOBREPORT_SACCT": str(tmp_path / "no-sacct"),
        "JOBREPORT_SCONTROL": str(tmp_path / "no-scontrol"),
        "JOBREPORT_PROMETHEUS_URL": "http://127.0.0.1:9", "JOBREPORT_PROMETHEUS_TIMEOUT": "1",
        "JOBREPORT_ARCHIVE_URL": "",
    }.items():
        monkeypatch.setenv(key, value)
    assert main(["show", "13", "--cluster", "v24", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["cluster"], report["job_id"], report["user"]) == ("v24", "13", "alice")
    assert report["job_name"] == "multi-task"
    assert paths and all("/job/13" in p and "cluster=v24" in p for p in paths if p != "/openapi/v3")
    # The main cluster reads its own sacct (absent here), never v24's slurmrestd.
    asked = len(paths)
    assert main(["show", "13", "--format", "json"]) == 1
    assert "sacct" in capsys.readouterr().err
    assert len(paths) == asked
