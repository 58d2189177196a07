"""AMD GPUs through the amdsmi binding's calls, replayed from real amd-smi output.

fixtures/exporter/amdsmi (fixtures/SOURCES.md): replay.json is an 8 x MI300X node from the
amd-smi output of AMD's blog post; replay-cpx.json one MI300X in CPX mode (rocm-smi's
rows of its eight partitions); replay-mi300a.json a 4 x MI300A node's sysfs identity.
Attribution is by Slurm's allocation, exactly as for NVIDIA: a prolog file, the devices
cgroup (render nodes, 226:N) or scontrol; never the job's environment.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys

import pytest

from jobs_exporter import gpu_amd
from jobs_exporter.__main__ import main
from jobs_exporter.gpu_inventory import Gpus
from tests.helpers.exporter_scrape import FIXTURES, make_settings, samples, scrape, value
from tests.helpers.fake_amdsmi import AMDSMI, FakeAmdSmi, replay_devices
from tests.helpers.fake_nvml import FakeNvml

V1_LOCAL = FIXTURES / "v1-local"  # job 2 of the local stack
MIB = 2**20


def load_derive():
    spec = importlib.util.spec_from_file_location("derive_amd", AMDSMI / "derive_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def alloc_dir(tmp_path, **jobs: str):
    alloc = tmp_path / "gpus"
    alloc.mkdir()
    for job_id, gpus in jobs.items():
        (alloc / job_id.lstrip("j")).write_text(gpus + "\n")
    return str(alloc)


def scrape_amd(tmp_path, smi=None, **changes):
    settings = make_settings(V1_LOCAL, gpus="auto", scontrol="", **changes)
    return scrape(settings, nvml=FakeNvml(driver=False), amdsmi=smi or FakeAmdSmi())


def info(text: str, jobid: str) -> list[dict]:
    return [dict(labels) for (name, labels), _ in samples(text).items()
            if name == "jobs_gpu_info" and ("jobid", jobid) in labels]


# ---------------------------------------------------------------- the recordings


def test_replays_are_what_the_script_derives_from_the_captures():
    derive = load_derive()
    for name, build in (("replay.json", derive.mi300x_node),
                        ("replay-mi300a.json", derive.mi300a_node),
                        ("replay-cpx.json", derive.cpx_card)):
        assert json.loads((AMDSMI / name).read_text()) == json.loads(json.dumps(build()))


def test_mi300x_replay_holds_the_blogs_readings():
    gpus = replay_devices()
    assert [g["bdf"][5:7] for g in gpus] == ["05", "26", "46", "65", "85", "a6", "c6", "e5"]
    first = gpus[0]
    assert first["uuid"] == "afff74a1-0000-1000-8054-e92b0a5d57c8"
    assert first["asic_info"]["market_name"] == "MI300X-O"
    assert first["activity"]["gfx_activity"] == 83  # amd-smi monitor -putm
    assert first["power_info"]["current_socket_power"] == 182
    assert first["vram_usage"] == {"vram_total": 196592, "vram_used": 7889485824 // MIB}
    assert first["process_list"][0]["pid"] == 207590
    assert [g["uuid"] is None for g in gpus] == [False] * 3 + [True] * 5  # list was cut
    assert first["energy_count"]["counter_resolution"] == pytest.approx(15.3)


# ---------------------------------------------------------------- the reader


def test_reader_on_the_replay():
    clock = [100.0]
    smi = FakeAmdSmi(clock=lambda: clock[0])
    amd = gpu_amd.AmdSmi(smi, clock=lambda: clock[0])
    assert amd.start()
    reading = amd.read(0)
    assert reading.utilization_ratio == 0.83
    assert reading.memory_used_bytes == 7524 * MIB
    assert reading.memory_total_bytes == 196592 * MIB
    assert reading.power_watts == 182.0
    assert amd.energy_joules(0) == 0.0
    clock[0] += 10.0  # ten seconds at the recorded 182 W, counted in 15.3 uJ ticks
    assert amd.energy_joules(0) == pytest.approx(1820.0, abs=1e-3)
    device = amd.devices[0]
    assert (device.vendor, device.model, device.bus_id) == ("amd", "MI300X-O", "0000:05:00.0")
    assert device.minor is None and device.partition is None  # render node not recorded


@pytest.mark.parametrize(
    ("power_info", "watts"),
    [
        ({"socket_power": 41, "current_socket_power": "N/A"}, 41.0),  # ROCm 7's field
        # The binding's answers on an MI100 (amdsmi issue 22): ROCm 6.0.2, then 5.7.1.
        ({"current_socket_power": 34, "average_socket_power": 34, "gfx_voltage": 65535,
          "soc_voltage": 65535, "mem_voltage": 65535, "power_limit": 290}, 34.0),
        ({"average_socket_power": 292, "gfx_voltage": 900, "soc_voltage": 0,
          "mem_voltage": 0, "power_limit": 290}, 292.0),
        ({"current_socket_power": "N/A", "average_socket_power": "N/A"}, None),
    ],
)
def test_power_fields_of_each_binding_release(power_info, watts):
    device = dict(replay_devices()[0], power_info=power_info)
    amd = gpu_amd.AmdSmi(FakeAmdSmi([device]))
    assert amd.start()
    assert amd.read(0).power_watts == watts


def test_not_applicable_activity_gives_no_utilization_series(tmp_path):
    devices = replay_devices()
    devices[0] = dict(devices[0], activity={"gfx_activity": "N/A", "umc_activity": "N/A"})
    text = scrape_amd(tmp_path, FakeAmdSmi(devices), gpu_alloc_dir=alloc_dir(tmp_path, j2="0"))
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="0") is None
    assert value(text, "jobs_gpu_power_watts", jobid="2", gpu="0") == 182.0


def test_no_driver_and_no_binding(monkeypatch):
    assert not gpu_amd.AmdSmi(FakeAmdSmi(driver=False)).start()
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # `import amdsmi` raises ImportError
    assert gpu_amd.load_amdsmi() is None


def test_node_without_any_gpu_driver_disables_the_collector(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        text = scrape(make_settings(V1_LOCAL, gpus="auto", scontrol=""),
                      nvml=FakeNvml(driver=False), amdsmi=FakeAmdSmi(driver=False))
    assert value(text, "jobs_scrape_collector_success", collector="gpu") == 1
    assert not [n for n, _ in samples(text) if n.startswith("jobs_gpu_")]
    assert any("GPU collector disabled" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- attribution


def test_allocated_job_gets_jobs_gpu_series_of_its_amd_cards(tmp_path):
    text = scrape_amd(tmp_path, gpu_alloc_dir=alloc_dir(tmp_path, j2="0,3"))
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="0") == 0.83
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="3") == 0.01
    assert value(text, "jobs_gpu_memory_used_bytes", jobid="2", gpu="3") == 7459 * MIB
    assert value(text, "jobs_gpu_memory_total_bytes", jobid="2", gpu="0") == 196592 * MIB
    assert value(text, "jobs_gpu_power_watts", jobid="2", gpu="3") == 116.0
    assert value(text, "jobs_gpu_energy_joules_total", jobid="2", gpu="0") == 0.0
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="1") is None
    assert sorted((i["gpu"], i["vendor"], i["model"], i["pci_bus_id"], i["uuid"])
                  for i in info(text, "2")) == [
        ("0", "amd", "MI300X-O", "0000:05:00.0", "afff74a1-0000-1000-8054-e92b0a5d57c8"),
        ("3", "amd", "MI300X-O", "0000:65:00.0", ""),
    ]


def test_job_environment_never_allocates_an_amd_gpu(tmp_path):
    """Job 2's environ (ROCR/CUDA variables of the capture) is never read: no allocation
    file and no scontrol means no GPU series."""
    text = scrape_amd(tmp_path)
    assert value(text, "jobs_scrape_collector_success", collector="gpu") == 1
    assert info(text, "2") == []


def test_cli_once_with_amdsmi_replay(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JOBREPORT_EXPORTER_SCONTROL", "")
    rc = main([
        "--once", "--amdsmi-replay", str(AMDSMI / "replay.json"),
        "--cgroup-root", str(V1_LOCAL / "cgroup"), "--proc-root", str(V1_LOCAL / "proc"),
        "--node-name", "vm", "--gpu-alloc-dir", alloc_dir(tmp_path, j2="1"),
        "--powercap-root", str(tmp_path / "none"), "--hwmon-root", str(tmp_path / "none"),
    ])
    out = capsys.readouterr().out
    assert rc == 0
    assert 'jobs_gpu_utilization_ratio{gpu="1",jobid="2"} 0.13' in out
    assert 'jobs_gpu_power_watts{gpu="1",jobid="2"} 143.0' in out
    assert 'pci_bus_id="0000:26:00.0"' in out and 'vendor="amd"' in out


# ---------------------------------------------------------------- partitions (CPX)


def test_cpx_partitions_are_devices_of_their_own(tmp_path):
    cpx = replay_devices("replay-cpx.json")
    tree = tmp_path / "node"
    shutil.copytree(V1_LOCAL, tree, symlinks=True)
    text = scrape(
        make_settings(tree, gpus="auto", scontrol="", gpu_alloc_dir=alloc_dir(tmp_path, j2="3")),
        nvml=FakeNvml(driver=False), amdsmi=FakeAmdSmi(cpx),
    )
    (one,) = info(text, "2")
    assert (one["gpu"], one["pci_bus_id"], one["device"]) == (
        "3", "0000:05:00.3", "/dev/dri/renderD131")
    # The card's 136 W shared by its eight partitions; the partition's own memory.
    assert value(text, "jobs_gpu_power_watts", jobid="2", gpu="3") == 17.0
    assert value(text, "jobs_gpu_memory_total_bytes", jobid="2", gpu="3") == 25767706624


def test_partitions_share_their_cards_energy_once():
    clock = [0.0]
    cpx = replay_devices("replay-cpx.json")
    amd = gpu_amd.AmdSmi(FakeAmdSmi(cpx, clock=lambda: clock[0]), clock=lambda: clock[0])
    gpus = Gpus([amd], "file")
    assert gpus.start() and len(gpus.devices) == 8
    assert {d.partition for d in gpus.devices.values()} == set(range(8))
    clock[0] = 100.0  # 100 s at partition 0's 136 W: the card's counter says 13.6 kJ
    shares = [gpus.energy_joules(i) for i in gpus.devices]
    assert shares == pytest.approx([13600.0 / 8] * 8, rel=1e-6)
    assert sum(shares) == pytest.approx(13600.0, rel=1e-6)  # the card counted once


def test_a_partitions_render_node_in_the_devices_cgroup_is_that_partition(tmp_path):
    cpx = replay_devices("replay-cpx.json")
    amd = gpu_amd.AmdSmi(FakeAmdSmi(cpx))
    gpus = Gpus([amd], "pci")
    assert gpus.start()
    assert gpus.numbers[(226, 133)] == 5 and gpus.devices[5].bus_id == "0000:05:00.5"


# ---------------------------------------------------------------- render nodes (MI300A)


@pytest.mark.parametrize("order", ["file", "pci"])
def test_render_nodes_and_bus_ids_of_a_real_node(order):
    """A 4 x MI300A node's sysfs: renderD128/136/144/152 on domains 0-3 of bus 02."""
    amd = gpu_amd.AmdSmi(FakeAmdSmi(replay_devices("replay-mi300a.json")))
    gpus = Gpus([amd], order)
    assert gpus.start()
    assert [(d.bus_id, d.path) for d in gpus.devices.values()] == [
        ("0000:02:00.0", "/dev/dri/renderD128"), ("0001:02:00.0", "/dev/dri/renderD136"),
        ("0002:02:00.0", "/dev/dri/renderD144"), ("0003:02:00.0", "/dev/dri/renderD152"),
    ]
    assert gpus.numbers == {(226, 128): 0, (226, 136): 1, (226, 144): 2, (226, 152): 3}
    assert gpus.read(1).utilization_ratio is None  # the capture holds no readings


def test_devices_cgroup_render_node_attributes_the_amd_card(tmp_path):
    tree = tmp_path / "node"
    shutil.copytree(V1_LOCAL, tree, symlinks=True)
    devices = tree / "cgroup" / "devices" / "slurm_vm" / "uid_1001" / "job_2" / "devices.list"
    devices.parent.mkdir(parents=True, exist_ok=True)
    devices.write_text("c 1:3 rwm\nc 226:144 rw\nc 238:0 rw\n")  # 238: /dev/kfd, not a GPU
    text = scrape(make_settings(tree, gpus="auto", scontrol=""), nvml=FakeNvml(driver=False),
                  amdsmi=FakeAmdSmi(replay_devices("replay-mi300a.json")))
    (one,) = info(text, "2")
    assert (one["gpu"], one["pci_bus_id"], one["device"]) == (
        "2", "0002:02:00.0", "/dev/dri/renderD144")
