"""MIG devices as the unit of allocation, on the replay of a real H100 in MIG mode.

fixtures/exporter/nvml/replay-mig.json (fixtures/SOURCES.md) is utkuozdemir's capture of an
H100 80GB HBM3 in MIG mode (nvidia-smi -q, -L and --query-gpu of one session): a 3g.40gb
running gpu_burn, a 2g.20gb and two 1g.10gb that ran nothing. NVML has no utilisation for
a MIG device; the 1g.10gb devices replay the only per-slice engine activity found (0, from
dcgm-exporter#512's H100 1g.10gb instances), the others none.
"""

from __future__ import annotations

import importlib.util
import json
import logging

import pytest

from jobs_exporter import gpu_mig, gpu_nvidia
from jobs_exporter.__main__ import main
from jobs_exporter.gpu_devices import GpuDevice, MigSlice, slurm_order
from jobs_exporter.gpu_inventory import Gpus
from tests.helpers.exporter_scrape import FIXTURES, make_settings, samples, scrape, value
from tests.helpers.fake_nvml import FakeNvml
from tests.test_exporter_gpu_alloc import DEVICES_3, ReplayScontrol, merged_tree
from tests.test_exporter_gpu_amd import alloc_dir

NVML = FIXTURES / "nvml"
MIB = 2**20
V1_LOCAL = FIXTURES / "v1-local"  # job 2 of the local stack


def mig_devices() -> list[dict]:
    return json.loads((NVML / "replay-mig.json").read_text())["devices"]


def info(text: str, jobid: str) -> list[dict]:
    return [dict(labels) for (name, labels), _ in samples(text).items()
            if name == "jobs_gpu_info" and ("jobid", jobid) in labels]


# ---------------------------------------------------------------- the recording


def test_replay_is_what_the_script_derives_from_the_captures():
    spec = importlib.util.spec_from_file_location("derive_nvml", NVML / "derive_replay.py")
    derive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(derive)
    assert mig_devices() == json.loads(json.dumps([derive.mig_card()]))


def test_replay_holds_the_captured_layout():
    (card,) = mig_devices()
    assert card["utilization_gpu_percent"] is None  # nvidia-smi: GPU-Util N/A under MIG
    assert card["power_milliwatts"] == 433780 and card["ecc_volatile"] == {
        "corrected": 0, "uncorrected": 0}
    devices = card["mig"]["devices"]
    assert [(d["gpu_instance"], d["name"].rsplit(" ", 1)[1]) for d in devices] == [
        (2, "3g.40gb"), (3, "2g.20gb"), (9, "1g.10gb"), (10, "1g.10gb")]
    assert [d["memory_total_bytes"] // MIB for d in devices] == [40448, 20096, 9984, 9984]
    assert devices[0]["memory_used_bytes"] == 11091 * MIB  # gpu_burn and two memhogs
    assert [d["processes_in_capture"] for d in devices] == [True, False, False, False]
    # engine activity only where a recording has one: the idle 1g.10gb devices
    assert [d.get("gpm_graphics_util_percent") for d in devices] == [None, None, 0.0, 0.0]


def test_parsers_on_the_drivers_files():
    # /proc/driver/nvidia-caps/mig-minors, as NVIDIA's container toolkit docs show it
    assert gpu_mig.parse_mig_minors(
        "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"
        "gpu31/gi14/ci7/access 4322\n") == {(0, 0, None): 3, (0, 0, 0): 4, (31, 14, 7): 4322}
    assert gpu_mig.parse_caps_major("Character devices:\n195 nvidia\n508 nvidia-caps\n") == 508
    assert gpu_mig.parse_caps_major("Character devices:\n195 nvidia\n") is None
    assert gpu_mig.profile_of("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == "1g.10gb"
    assert gpu_mig.profile_of("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb") == "1c.3g.20gb"
    assert gpu_mig.profile_of("NVIDIA H100 80GB HBM3") == ""


# ---------------------------------------------------------------- the reader


def test_a_card_in_mig_mode_is_its_mig_devices_in_slurms_order():
    gpus = Gpus([gpu_nvidia.Nvml(FakeNvml(mig_devices()))], "file")
    assert gpus.start()
    # no capability files here: PCI order, by GPU instance
    assert [gpus.labels[i] for i in gpus.devices] == ["0/2", "0/3", "0/9", "0/10"]
    assert [d.mig.profile for d in gpus.devices.values()] == [
        "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert [d.power_share for d in gpus.devices.values()] == ["3/7", "2/7", "1/7", "1/7"]
    assert {d.mig.parent_uuid for d in gpus.devices.values()} == {
        "GPU-00000000-0000-0000-0000-000000000000"}


def test_a_mig_devices_readings_and_its_share_of_the_cards_power():
    clock = [0.0]
    nvml = gpu_nvidia.Nvml(FakeNvml(mig_devices(), clock=lambda: clock[0]), clock=lambda: clock[0])
    gpus = Gpus([nvml], "file")
    assert gpus.start()
    first = gpus.read(2)  # GI 9, a 1g.10gb
    assert first.utilization_ratio is None  # one monitor sample: no interval yet
    assert (first.memory_used_bytes, first.memory_total_bytes) == (9 * MIB, 9984 * MIB)
    assert first.power_watts == pytest.approx(433.78 / 7)
    clock[0] = 30.0
    assert gpus.read(2).utilization_ratio == 0.0  # the replayed engine activity
    assert gpus.read(0).utilization_ratio is None  # 3g.40gb: no activity recorded
    energies = [gpus.energy_joules(i) for i in gpus.devices]
    assert energies == pytest.approx([433.78 * 30 * s / 7 for s in (3, 2, 1, 1)])
    assert sum(energies) == pytest.approx(433.78 * 30)  # the card counted once


def test_no_performance_monitor_no_mig_utilisation(caplog):
    card = {**mig_devices()[0], "gpm": False}  # an A100: MIG, but no GPM
    gpus = Gpus([gpu_nvidia.Nvml(FakeNvml([card]))], "file")
    assert gpus.start()
    with caplog.at_level(logging.INFO):
        assert [gpus.read(2).utilization_ratio for _ in range(2)] == [None, None]
    assert "no GPU performance monitoring" in caplog.text


# ---------------------------------------------------------------- jobs


def test_a_job_on_a_1g_10gb_device_has_its_series(tmp_path):
    clock = [0.0]
    nv = FakeNvml(mig_devices(), clock=lambda: clock[0])
    settings = make_settings(V1_LOCAL, gpus="auto", scontrol="",
                             gpu_alloc_dir=alloc_dir(tmp_path, j2="2"))
    from prometheus_client import CollectorRegistry, generate_latest

    from jobs_exporter.registry import JobsCollector
    registry = CollectorRegistry()
    registry.register(JobsCollector(settings, nvml=nv, user_name=lambda uid: "alice"))
    generate_latest(registry)
    clock[0] = 30.0
    text = generate_latest(registry).decode()
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="0/9") == 0.0
    assert value(text, "jobs_gpu_memory_total_bytes", jobid="2", gpu="0/9") == 9984 * MIB
    assert value(text, "jobs_gpu_power_watts", jobid="2", gpu="0/9") == pytest.approx(
        433.78 / 7)
    assert value(text, "jobs_gpu_ecc_errors_total", jobid="2", gpu="0/9",
                 type="uncorrected") == 0.0
    (one,) = info(text, "2")
    assert one == {"jobid": "2", "gpu": "0/9", "vendor": "nvidia",
                   "model": "NVIDIA H100 80GB HBM3",
                   "uuid": "MIG-00000002-0000-0000-0000-000000000002",
                   "pci_bus_id": "0000:00:09.0", "device": "", "profile": "1g.10gb",
                   "parent_uuid": "GPU-00000000-0000-0000-0000-000000000000",
                   "power_share": "1/7"}
    assert value(text, "jobs_energy_joules_total", jobid="2", gpu="0/9",
                 source="gpu") == pytest.approx(433.78 * 30 / 7)


def test_a_job_on_the_busy_3g_40gb_device_has_no_made_up_utilisation(tmp_path):
    settings = make_settings(V1_LOCAL, gpus="auto", scontrol="",
                             gpu_alloc_dir=alloc_dir(tmp_path, j2="0"))
    text = scrape(settings, nvml=FakeNvml(mig_devices()))
    assert value(text, "jobs_gpu_memory_used_bytes", jobid="2", gpu="0/2") == 11091 * MIB
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="0/2") is None
    assert info(text, "2")[0]["profile"] == "3g.40gb"


MINORS = "".join(f"gpu0/gi{gi}/access {3 + 9 * gi}\ngpu0/gi{gi}/ci0/access {4 + 9 * gi}\n"
                 for gi in range(15))  # the driver's numbering (NVIDIA's docs: gi0 3, ci0 4)


def test_the_devices_cgroup_names_a_mig_device_by_its_capability_files(tmp_path, caplog):
    """Job 3's whitelist allows the card (195:0, every MIG job of it is allowed that) and
    GI 9's capability files; job 11 (prolog: Slurm's index 3, with capability files known:
    file order) gets GI 10."""
    tree = merged_tree(tmp_path)
    caps = tree / "proc" / "driver" / "nvidia-caps"
    caps.mkdir(parents=True)
    (caps / "mig-minors").write_text("config 1\nmonitor 2\n" + MINORS)
    (tree / "proc" / "devices").write_text("Character devices:\n195 nvidia\n508 nvidia-caps\n")
    (tree / DEVICES_3).write_text("c 195:0 rw\nc 195:255 rw\nc 508:84 r\nc 508:85 r\n")
    with caplog.at_level(logging.WARNING):
        text = scrape(make_settings(tree, gpus="auto", gpu_alloc_dir=alloc_dir(tmp_path, j11="3")),
                      nvml=FakeNvml(mig_devices()), scontrol=ReplayScontrol(tree))
    (three,) = info(text, "3")
    assert three["gpu"] == "0/9" and three["device"] == (
        "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap84,/dev/nvidia-caps/nvidia-cap85")
    (eleven,) = info(text, "11")
    assert eleven["gpu"] == "0/10"
    assert "match no GPU" not in caplog.text  # the card's own file is no unknown GPU


def test_file_order_puts_mig_devices_after_their_cards_file():
    def mig(minor, gi, cap):
        return GpuDevice("nvidia", "", "", f"0000:{minor + 1:02x}:00.0", None,
                         mig=MigSlice("", minor, gi, 0, "1g.10gb", 1, 1, 7, 508, cap, cap + 1))
    whole = GpuDevice("nvidia", "", "", "0000:01:00.0", 1)
    slices = [mig(0, 10, 93), mig(0, 9, 84), mig(2, 9, 30 * 135 + 84)]
    ordered = slurm_order([*slices, whole], "file")
    assert [d.label(0) for d in ordered] == ["0/9", "0/10", "0", "2/9"]


def test_cli_once_with_the_mig_replay(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JOBREPORT_EXPORTER_SCONTROL", "")
    rc = main([
        "--once", "--nvml-replay", str(NVML / "replay-mig.json"),
        "--cgroup-root", str(V1_LOCAL / "cgroup"), "--proc-root", str(V1_LOCAL / "proc"),
        "--node-name", "vm", "--gpu-alloc-dir", alloc_dir(tmp_path, j2="3"),
        "--powercap-root", str(tmp_path / "none"), "--hwmon-root", str(tmp_path / "none"),
    ])
    out = capsys.readouterr().out
    assert rc == 0
    assert 'jobs_gpu_memory_total_bytes{gpu="0/10",jobid="2"} 1.0468982784e+10' in out
    assert 'profile="1g.10gb"' in out and 'power_share="1/7"' in out
    assert 'jobs_gpu_ecc_errors_total{gpu="0/10",jobid="2",type="uncorrected"} 0.0' in out
    assert 'jobs_gpu_utilization_ratio{gpu="0/10"' not in out  # one scrape: no interval


def test_an_unreadable_mig_device_is_left_out_and_the_others_read(caplog):
    card = mig_devices()[0]
    broken = {k: v for k, v in card["mig"]["devices"][1].items() if k != "gpu_instance_slices"}
    card["mig"]["devices"][1] = broken  # its attributes raise NotSupported
    gpus = Gpus([gpu_nvidia.Nvml(FakeNvml([card]))], "file")
    with caplog.at_level(logging.WARNING):
        assert gpus.start()
    assert [gpus.labels[i] for i in gpus.devices] == ["0/2", "0/9", "0/10"]
    assert "MIG device 1 of GPU 0000:00:09.0 unreadable" in caplog.text
