"""An exporter playing recorded readings back says so: ``jobs_exporter_replay_info``, one
series per replay (the real replay classes on the fixtures the replay tests use), and
none at all from an exporter that measures its hardware."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jobs_exporter import amdsmi_replay, nvml_replay
from jobs_exporter.__main__ import main
from jobs_exporter.powercap_replay import start_replay
from jobs_exporter.registry import JobsCollector
from tests.helpers.exporter_scrape import FIXTURES, make_settings, scrape, value
from tests.helpers.promtool import check_metrics

V1_LOCAL = FIXTURES / "v1-local"
NVML = FIXTURES / "nvml" / "replay.json"
AMDSMI = FIXTURES / "amdsmi" / "replay.json"
TRACE = FIXTURES / "energy/rapl/icpe2024_broadwell-ep_compute_bdbda7c9_perf_first-second.txt"
REPLAY_INFO = "jobs_exporter_replay_info"


def replays_in(text: str) -> set[tuple[str, str]]:
    """(source, recording) of each replay_info sample."""
    return {(s.labels["source"], s.labels["recording"])
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == REPLAY_INFO and s.value == 1}


def test_each_replay_is_named_with_its_recording(tmp_path):
    powercap = start_replay(str(TRACE), str(FIXTURES / "energy/powercap"))
    try:
        settings = make_settings(V1_LOCAL, gpus="auto", scontrol="",
                                 powercap_root=powercap.root)
        registry = CollectorRegistry()
        registry.register(JobsCollector(
            settings, nvml=nvml_replay.load_replay(NVML),
            amdsmi=amdsmi_replay.load_replay(AMDSMI), replays=[powercap],
            user_name=lambda uid: "alice"))
        text = generate_latest(registry).decode()
    finally:
        powercap.stop()
    assert replays_in(text) == {("nvml", "replay.json"), ("amdsmi", "replay.json"),
                                ("powercap", TRACE.name)}
    assert value(text, REPLAY_INFO, source="powercap", recording=TRACE.name) == 1
    assert check_metrics(text) == (0, "")


def test_an_exporter_measuring_its_hardware_has_no_replay_family():
    text = scrape(make_settings(V1_LOCAL))
    assert REPLAY_INFO not in text  # not even its HELP and TYPE lines
    assert replays_in(text) == set()


def test_a_replay_the_exporter_does_not_read_is_not_claimed():
    # --no-gpus: the NVML replay given is never asked, so no reading is a replayed one.
    text = scrape(make_settings(V1_LOCAL, gpus="off"), nvml=nvml_replay.load_replay(NVML))
    assert REPLAY_INFO not in text


def test_cli_once_names_the_replayed_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JOBREPORT_EXPORTER_SCONTROL", "")
    assert main([
        "--once", "--nvml-replay", str(NVML),
        "--cgroup-root", str(V1_LOCAL / "cgroup"), "--proc-root", str(V1_LOCAL / "proc"),
        "--node-name", "vm", "--gpu-alloc-dir", str(tmp_path / "none"),
        "--powercap-root", str(tmp_path / "none"), "--hwmon-root", str(tmp_path / "none"),
    ]) == 0
    out = capsys.readouterr().out
    assert f'{REPLAY_INFO}{{recording="replay.json",source="nvml"}} 1.0' in out
