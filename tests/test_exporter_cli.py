"""Settings from JOBREPORT_EXPORTER_*, CLI overrides, --once, and the README table."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from jobs_exporter.__main__ import build_parser, main, settings_from
from jobs_exporter.settings import Settings, SettingsError
from tests.helpers.exporter_scrape import FIXTURES
from tests.helpers.wait import wait_for


def test_defaults():
    s = Settings.from_env({})
    assert s.listen == "0.0.0.0:9306"
    assert s.cgroup_root == "/sys/fs/cgroup" and s.proc_root == "/proc"
    assert s.scratch == () and s.fd_cache


def test_from_env():
    s = Settings.from_env(
        {
            "JOBREPORT_EXPORTER_SCRATCH": "/scratch:/tmp/s",
            "JOBREPORT_EXPORTER_NODE_NAME": "n1",
            "JOBREPORT_EXPORTER_GPUS": "off",
            "JOBREPORT_EXPORTER_FD_CACHE": "0",
        }
    )
    assert s.scratch == ("/scratch", "/tmp/s")
    assert s.effective_node_name == "n1" and s.gpus == "off" and not s.fd_cache


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JOBREPORT_EXPORTER_GPUS", "yes"),
        ("JOBREPORT_EXPORTER_FD_CACHE", "maybe"),
        ("JOBREPORT_EXPORTER_LISTEN", "9306"),
    ],
)
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


def test_unknown_variable_is_an_error_naming_it():
    with pytest.raises(SettingsError, match="JOBREPORT_EXPORTER_FD_CACHED"):
        Settings.from_env({"JOBREPORT_EXPORTER_FD_CACHED": "0"})
    # Other deployables' JOBREPORT_* settings are not the exporter's business.
    assert Settings.from_env({"JOBREPORT_CLUSTER": "x", "JOBREPORT_BENCH_JOB": "1"}).fd_cache


def test_unknown_variable_stops_the_command_line(monkeypatch, capsys):
    monkeypatch.setenv("JOBREPORT_EXPORTER_NODENAME", "n1")
    with pytest.raises(SystemExit) as exc:
        main(["--once"])
    assert exc.value.code == 2
    assert "JOBREPORT_EXPORTER_NODENAME" in capsys.readouterr().err


def test_cli_overrides_env():
    env = Settings.from_env(
        {"JOBREPORT_EXPORTER_SCRATCH": "/a", "JOBREPORT_EXPORTER_NODE_NAME": "x"}
    )
    args = build_parser().parse_args(["--scratch", "/b", "--scratch", "/c", "--node-name", "y"])
    s = settings_from(args, env)
    assert s.scratch == ("/b", "/c") and s.node_name == "y"


def test_flags_take_what_their_variables_take():
    """Both exporters lay their flags over the environment with jobreport_common's
    with_flags: each flag parsed by its setting's parser, refused naming the flag (the
    jobs exporter took any text before, and found a bad --listen only later)."""
    env = Settings.from_env({})
    with pytest.raises(SettingsError, match="^--listen: "):
        settings_from(build_parser().parse_args(["--listen", "nowhere"]), env)
    s = settings_from(build_parser().parse_args(["--no-gpus", "--gpu-order", "pci"]), env)
    assert (s.gpus, s.gpu_order) == ("off", "pci")
    assert settings_from(build_parser().parse_args([]), env) == env


def test_once_prints_exposition(capsys, monkeypatch):
    tree = FIXTURES / "v2-samples"
    monkeypatch.setenv("JOBREPORT_EXPORTER_GPUS", "off")
    rc = main(["--once", "--cgroup-root", str(tree / "cgroup"), "--proc-root", str(tree / "proc")])
    assert rc == 0
    assert 'jobs_cpu_seconds_total{jobid="4",mode="user"}' in capsys.readouterr().out


def test_console_script_help():
    exe = pathlib.Path(sys.executable).parent / "jobs-exporter"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    for flag in ("--listen", "--cgroup-root", "--proc-root", "--scratch", "--node-name", "--once"):
        assert flag in out.stdout


def test_listen_serves_metrics():
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tree = FIXTURES / "v2-samples"
    exe = pathlib.Path(sys.executable).parent / "jobs-exporter"
    proc = subprocess.Popen(
        [
            str(exe),
            "--listen",
            f"127.0.0.1:{port}",
            "--no-gpus",
            "--cgroup-root",
            str(tree / "cgroup"),
            "--proc-root",
            str(tree / "proc"),
        ],
        stderr=subprocess.DEVNULL,
    )
    try:
        def scraped() -> str | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    return r.read().decode()
            except OSError:
                assert proc.poll() is None, "the exporter exited"
                return None

        body = wait_for(scraped, 10, "the exporter answering /metrics", every=0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    assert 'jobs_info{jobid="4",uid="20821",user="20821"} 1.0' in body
