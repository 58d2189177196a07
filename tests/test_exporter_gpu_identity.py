"""GPU identity by PCI bus id and device file, never by a driver's enumeration index.

Peers' bug (jobstats#34, slurm-job-exporter#63/#64): on a node whose /dev/nvidiaN minor
numbers differ from NVML's order (there /dev/nvidia0 was nvidia-smi's GPU 6, GPU 0 was
/dev/nvidia4), reading NVML handle N for Slurm's GPU N monitors another job's card. The
node below is arranged that way: eight copies of the real Tesla T4 reading of
fixtures/exporter/nvml/replay.json, each with its own bus id and the minor numbers of that
report, in NVML (PCI) order. Jobs are the real captures of the GPU ownership tests.
"""

from __future__ import annotations

import logging

import pytest

from jobs_exporter import gpu_nvidia
from jobs_exporter.gpu_devices import GpuDevice, parse_bus_id, slurm_order
from tests.helpers.exporter_scrape import make_settings, samples, scrape, value
from tests.helpers.fake_nvml import FakeNvml
from tests.test_exporter_gpu_alloc import DEVICES_3, ReplayScontrol, merged_tree

# /dev/nvidia<minor> of NVML's devices 0-7: GPU 0 is /dev/nvidia4, GPU 6 is /dev/nvidia0.
MINORS = (4, 5, 7, 6, 2, 3, 0, 1)


def card(nvml_index: int, minor: int | None) -> dict:
    t4 = FakeNvml().devices[1]
    assert t4["name"] == "Tesla T4" and t4["minor_number"] == 0
    return {**t4, "uuid": None, "minor_number": minor,
            "bus_id": f"00000000:{0x10 * (nvml_index + 1):02X}:00.0"}


def mismatched_node() -> list[dict]:
    return [card(i, minor) for i, minor in enumerate(MINORS)]


def bus_of_minor(minor: int) -> str:
    return parse_bus_id(card(MINORS.index(minor), minor)["bus_id"])


def gpu_info(text: str, jobid: str) -> list[tuple[str, str, str]]:
    return sorted((d["gpu"], d["device"], d["pci_bus_id"])
                  for (name, labels), _ in samples(text).items()
                  if name == "jobs_gpu_info" and (d := dict(labels))["jobid"] == jobid)


def scrape_node(tree, devices, **changes) -> str:
    settings = make_settings(tree, gpus="auto", **changes)
    return scrape(settings, nvml=FakeNvml(devices), scontrol=ReplayScontrol(tree))


def test_each_job_gets_its_own_cards_when_minors_differ_from_nvml_order(tmp_path):
    """Job 3's devices cgroup allows /dev/nvidia0 (NVML's GPU 6); the prolog gave job 11
    Slurm's GPU 1, /dev/nvidia1 in gres.conf's file order (NVML's GPU 7). NVML's GPUs 0
    and 1 are nobody's."""
    tree = merged_tree(tmp_path)
    (tree / DEVICES_3).write_text("c 195:0 rwm\nc 195:255 rw\nc 136:* rwm\n")
    alloc = tmp_path / "gpus"
    alloc.mkdir()
    (alloc / "11").write_text("1\n")
    text = scrape_node(tree, mismatched_node(), gpu_alloc_dir=str(alloc))
    assert gpu_info(text, "3") == [("0", "/dev/nvidia0", bus_of_minor(0))]
    assert gpu_info(text, "11") == [("1", "/dev/nvidia1", bus_of_minor(1))]
    assert bus_of_minor(0) == "0000:70:00.0" and bus_of_minor(1) == "0000:80:00.0"
    assert value(text, "jobs_gpu_utilization_ratio", jobid="3", gpu="0") == 0.0


@pytest.mark.parametrize(
    ("order", "device"),
    [("file", "/dev/nvidia1"),  # gres.conf File=/dev/nvidia[0-7]: the second device file
     ("pci", "/dev/nvidia5")],  # AutoDetect=nvml: the second GPU in PCI bus id order
)
def test_slurm_index_follows_slurms_order_not_nvmls(tmp_path, order, device):
    """scontrol's IDX:1 of job 3 (the capture) on the mismatched node, NVML enumerating
    the cards backwards: Slurm's GPU 1 in Slurm's order, whatever NVML's index."""
    tree = merged_tree(tmp_path)
    text = scrape_node(tree, list(reversed(mismatched_node())), gpu_order=order)
    minor = int(device.removeprefix("/dev/nvidia"))
    assert gpu_info(text, "3") == [("1", device, bus_of_minor(minor))]


def test_slurm_index_skips_a_missing_device_file(tmp_path):
    """gres.conf File=/dev/nvidia[0,2,3] (the node's /dev/nvidia1 is gone): Slurm's GPU 1
    is /dev/nvidia2, not minor 1."""
    tree = merged_tree(tmp_path)
    nodes = [card(0, 0), card(1, 2), card(2, 3)]
    text = scrape_node(tree, nodes)  # job 3: IDX:1
    assert gpu_info(text, "3") == [("1", "/dev/nvidia2", "0000:20:00.0")]


def test_device_file_no_gpu_reports_is_no_gpu_not_a_position(tmp_path, caplog):
    """A driver that cannot tell one card's minor number: the cgroup's 195:1 names no known
    card, so the job gets none (the old code took 1 as a PCI position)."""
    tree = merged_tree(tmp_path)
    (tree / DEVICES_3).write_text("c 195:1 rwm\n")
    nodes = [card(0, None), card(1, 0)]
    with caplog.at_level(logging.WARNING):
        text = scrape_node(tree, nodes)
    assert gpu_info(text, "3") == []
    assert not [n for n, labels in samples(text) if n.startswith("jobs_gpu_")
                and ("jobid", "3") in labels]
    assert value(text, "jobs_scrape_collector_success", collector="gpu") == 1
    assert any("'195:1'" in r.getMessage() and "match no GPU" in r.getMessage()
               for r in caplog.records)


def test_nvml_reader_describes_devices_by_bus_id_minor_and_name():
    nvml = gpu_nvidia.Nvml(FakeNvml(mismatched_node()))
    assert nvml.start()
    assert [d.minor for d in nvml.devices.values()] == list(range(8))
    first = nvml.devices[0]
    assert first == GpuDevice("nvidia", "Tesla T4", "", "0000:70:00.0", 0)
    assert first.path == "/dev/nvidia0" and first.number == (195, 0)


@pytest.mark.parametrize(
    ("text", "bus_id"),
    [("00000000:00:1E.0", "0000:00:1e.0"),  # NVML
     ("0000:05:00.0", "0000:05:00.0"),  # amdsmi
     ("c6:00.0", "0000:c6:00.0"),
     ("0003:02:00.0", "0003:02:00.0")],
)
def test_parse_bus_id(text, bus_id):
    assert parse_bus_id(text) == bus_id


@pytest.mark.parametrize("text", ["", "00:1E", "0000:05:00.8", "GPU-1234", "x:y:z.0"])
def test_parse_bus_id_rejects(text):
    with pytest.raises(ValueError):
        parse_bus_id(text)


def test_file_order_is_slurms_natural_order():
    """Slurm sorts gres.conf files with strnatcmp: renderD9 before renderD10."""
    devices = [GpuDevice("amd", "", "", f"0000:{b:02x}:00.0", m)
               for b, m in ((1, 138), (2, 129), (3, 130))]
    assert [d.minor for d in slurm_order(devices, "file")] == [129, 130, 138]
    assert [d.minor for d in slurm_order(devices, "pci")] == [138, 129, 130]
    nvidia = [GpuDevice("nvidia", "", "", f"0000:{b:02x}:00.0", m)
              for b, m in ((1, 10), (2, 9))]
    assert [d.minor for d in slurm_order(nvidia, "file")] == [9, 10]
