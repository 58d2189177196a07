"""GPU index mapping (minor number, else PCI bus id order) on replayed NVML readings."""

from __future__ import annotations

import json
import sys

from jobs_exporter import gpu_nvidia
from tests.helpers.fake_nvml import REPLAY, FakeNvml


def devices():
    return json.loads(REPLAY.read_text())["devices"]


def test_replay_matches_the_captures():
    h100, t4 = devices()
    assert h100["utilization_gpu_percent"] == 100 and h100["power_milliwatts"] == 631950
    assert t4["memory_total_bytes"] == 15360 * 2**20 and t4["minor_number"] == 0


def test_pci_bus_id_order_when_minor_numbers_unknown():
    # NVML enumerates T4 first here; PCI order 00:09.0 (H100) < 00:1E.0 (T4) decides.
    nvml = gpu_nvidia.Nvml(FakeNvml(list(reversed(devices()))))
    assert nvml.start()
    assert nvml.read(0).power_watts == 631.95
    assert nvml.read(1).utilization_ratio == 0.0
    assert nvml.read(2) is None


def test_minor_numbers_win_when_every_gpu_has_one():
    h100, t4 = devices()
    h100 = {**h100, "minor_number": 1}  # physical /dev/nvidia1
    nvml = gpu_nvidia.Nvml(FakeNvml([h100, t4]))
    assert nvml.start()
    assert nvml.read(1).memory_total_bytes == h100["memory_total_bytes"]
    assert nvml.read(0).memory_total_bytes == t4["memory_total_bytes"]


def test_power_not_supported_is_none():
    dev = {**devices()[1], "power_milliwatts": None}
    nvml = gpu_nvidia.Nvml(FakeNvml([dev]))
    assert nvml.start()
    assert nvml.read(0).power_watts is None


def test_no_driver():
    assert not gpu_nvidia.Nvml(FakeNvml(driver=False)).start()


def test_real_pynvml_without_driver_disables_quietly():
    module = gpu_nvidia.load_nvml()
    assert module is not None  # nvidia-ml-py is locked in requirements/dev.txt (the gpu extra)
    assert gpu_nvidia.Nvml(module).start() is False  # the test machines have no NVIDIA driver


def test_load_nvml_without_nvidia_ml_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    assert gpu_nvidia.load_nvml() is None

