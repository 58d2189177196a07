"""The NVML readings recorded on a real NVIDIA H200 (driver 580.159.04), idle and under a
PyTorch bf16 matmul load, replayed through the exporter; and the exporter's real pynvml
path on that card (its saved scrapes) against the replay of the same readings.

fixtures/exporter/nvml/record_real.py recorded them: per phase, samples of the NVML calls
jobs_exporter/gpu_nvidia.py makes, then one scrape of the captured job tree v1-local (job 2, its GPU
allocation from a prolog file naming GPU 0) with every NVML call and its result. The
replay files hold exactly the values that scrape read.
"""

from __future__ import annotations

import csv
import json
import statistics

import pytest

from jobs_exporter import gpu_nvidia
from tests.helpers.exporter_scrape import FIXTURES, make_settings, samples, scrape
from tests.helpers.fake_nvml import FakeNvml

NVML = FIXTURES / "nvml"
PREFIX = "real_h200_580.159.04_"
RECORD = json.loads((NVML / f"{PREFIX}nvml_record.json").read_text())
PHASES = ("idle", "load")
MIB = 2**20
# What the card read in each phase's scrape (the saved exposition's jobs_gpu_* values).
EXPECTED = {
    "idle": {
        "jobs_gpu_utilization_ratio": 0.0,
        "jobs_gpu_memory_used_bytes": 644939776,  # the driver's reserve, nothing allocated
        "jobs_gpu_memory_total_bytes": 150754820096,
        "jobs_gpu_power_watts": 77.785,
        "jobs_gpu_energy_joules_total": 4447.671,
    },
    "load": {
        "jobs_gpu_utilization_ratio": 1.0,
        "jobs_gpu_memory_used_bytes": 1839071232,
        "jobs_gpu_memory_total_bytes": 150754820096,
        "jobs_gpu_power_watts": 691.174,
        "jobs_gpu_energy_joules_total": 20907.244,
    },
}


def replay_devices(phase: str) -> list[dict]:
    return json.loads((NVML / f"{PREFIX}nvml_replay_{phase}.json").read_text())["devices"]


def gpu_values(text: str) -> dict[str, float]:
    """jobs_gpu_* of job 2, GPU 0, by sample name."""
    return {
        name: v
        for (name, labels), v in samples(text).items()
        if name.startswith("jobs_gpu_") and labels == (("gpu", "0"), ("jobid", "2"))
    }


def scrape_replay(phase: str, tmp_path) -> str:
    """The exporter on the same job tree and allocation as the recording's scrape."""
    alloc = tmp_path / "gpus"
    alloc.mkdir()
    (alloc / "2").write_text("0\n")
    settings = make_settings(
        FIXTURES / "v1-local", gpus="auto", gpu_alloc_dir=str(alloc), scontrol=""
    )
    return scrape(settings, nvml=FakeNvml(replay_devices(phase)))


def test_recording_is_a_real_h200():
    meta = RECORD["meta"]
    assert meta["driver_version"] == "580.159.04" and meta["device_count"] == 1
    assert RECORD["errors"] == []
    for sample in RECORD["samples"]:
        (device,) = sample["devices"]
        assert device["name"] == "NVIDIA H200" and device["minor_number"] == 0
        assert device["memory_info"]["total"] == 150754820096  # 143,771 MiB usable
    assert [s["phase"] for s in RECORD["samples"]] == ["idle"] * 10 + ["load"] * 10


def test_replay_files_hold_what_the_exporters_scrape_read():
    for phase in PHASES:
        assert replay_devices(phase) == RECORD["replay"][phase]["devices"]
        read = {c["call"]: c["result"] for c in RECORD["exporter"][phase]["scrape_calls"]}
        (device,) = replay_devices(phase)
        assert device["utilization_gpu_percent"] == read["nvmlDeviceGetUtilizationRates"]["gpu"]
        assert device["memory_used_bytes"] == read["nvmlDeviceGetMemoryInfo"]["used"]
        assert device["power_milliwatts"] == read["nvmlDeviceGetPowerUsage"]
        assert device["energy_millijoules"] == read["nvmlDeviceGetTotalEnergyConsumption"]
        assert device["minor_number"] == read["nvmlDeviceGetMinorNumber"] == 0


@pytest.mark.parametrize("phase", PHASES)
def test_replayed_recording_gives_the_recorded_values(phase, tmp_path):
    assert gpu_values(scrape_replay(phase, tmp_path)) == EXPECTED[phase]


@pytest.mark.parametrize("phase", PHASES)
def test_real_path_and_replay_path_agree(phase, tmp_path):
    """The exposition the exporter produced on the real card equals, for every GPU series,
    the one the replay path produces from the readings it made."""
    real = (NVML / f"{PREFIX}exporter_scrape_{phase}.prom").read_text()
    assert gpu_values(real) == EXPECTED[phase]
    assert gpu_values(scrape_replay(phase, tmp_path)) == gpu_values(real)


@pytest.mark.parametrize("phase", PHASES)
def test_nvml_reader_on_the_replay_equals_the_real_one(phase):
    nvml = gpu_nvidia.Nvml(FakeNvml(replay_devices(phase)))
    assert nvml.start() and sorted(nvml.handles) == RECORD["exporter"][phase]["indexes"] == [0]
    real = RECORD["exporter"][phase]["readings"]["0"]
    # The reader on the real card ran moments before the scrape: same static values, and
    # for the changing ones the figures of the phase.
    reading = nvml.read(0)
    assert reading.memory_total_bytes == real["read"]["memory_total_bytes"]
    assert reading.utilization_ratio == real["read"]["utilization_ratio"]
    assert reading.memory_used_bytes == real["read"]["memory_used_bytes"]
    assert reading.power_watts == pytest.approx(real["read"]["power_watts"], rel=0.01)
    assert nvml.energy_joules(0) == replay_devices(phase)[0]["energy_millijoules"] / 1000


@pytest.mark.parametrize(
    ("phase", "util", "watts"), [("idle", (0, 0), (77, 79)), ("load", (99, 100), (685, 700))]
)
def test_samples_of_each_phase(phase, util, watts):
    devices = [s["devices"][0] for s in RECORD["samples"] if s["phase"] == phase]
    times = [s["t_unix"] for s in RECORD["samples"] if s["phase"] == phase]
    assert all(util[0] <= d["utilization"]["gpu"] <= util[1] for d in devices)
    powers = [d["power_usage_mw"] / 1000 for d in devices]
    assert all(watts[0] <= w <= watts[1] for w in powers)
    # The energy counter advances by the power drawn: mean power over the phase within 2 %.
    joules = (devices[-1]["total_energy_mj"] - devices[0]["total_energy_mj"]) / 1000
    assert joules / (times[-1] - times[0]) == pytest.approx(statistics.mean(powers), rel=0.02)


def test_nvml_memory_used_counts_the_driver_reserve_nvidia_smi_does_not():
    """nvmlDeviceGetMemoryInfo (v1, what the exporter calls) reports used = total - free,
    which includes the driver's reserve (615 MiB here); nvidia-smi's memory.used (and
    NVML's v2 call) leaves it out. So an idle, allocated H200 reads 615 MiB used in
    jobs_gpu_memory_used_bytes, while nvidia-smi says 0 MiB."""
    rows = {}
    for phase in PHASES:
        with (NVML / f"{PREFIX}nvidia-smi_query-gpu_csv_{phase}.csv").open() as f:
            rows[phase] = list(csv.DictReader(f, skipinitialspace=True))
    assert [r["memory.used [MiB]"] for r in rows["idle"]] == ["0 MiB"] * 10
    assert {r["memory.used [MiB]"] for r in rows["load"]} == {"1139 MiB"}
    assert {r["memory.reserved [MiB]"] for p in PHASES for r in rows[p]} == {"616 MiB"}
    for sample in RECORD["samples"]:
        v1, v2 = sample["devices"][0]["memory_info"], sample["devices"][0]["memory_info_v2"]
        assert v1["used"] == v1["total"] - v1["free"] == v2["used"] + v2["reserved"]
        assert v2["reserved"] == 644939776  # 615.06 MiB
    assert EXPECTED["idle"]["jobs_gpu_memory_used_bytes"] == 644939776
    load_v2 = RECORD["samples"][-1]["devices"][0]["memory_info_v2"]["used"]
    assert load_v2 // MIB == 1138  # nvidia-smi rounds 1138.8 MiB to 1139


def test_nvidia_smi_agrees_with_nvml_power():
    """The CSV row taken right after each NVML sample (some 30 ms later): power.draw is
    nvmlDeviceGetPowerUsage's averaged reading, to within 0.05 W."""
    for phase in PHASES:
        with (NVML / f"{PREFIX}nvidia-smi_query-gpu_csv_{phase}.csv").open() as f:
            rows = list(csv.DictReader(f, skipinitialspace=True))
        nvml = [s["devices"][0] for s in RECORD["samples"] if s["phase"] == phase]
        assert rows, phase
        for row, device in zip(rows, nvml, strict=True):
            assert row["name"] == "NVIDIA H200" and row["pci.bus_id"] == "00000000:00:06.0"
            drawn = float(row["power.draw [W]"].split()[0])
            assert drawn == pytest.approx(device["power_usage_mw"] / 1000, abs=0.05)


def test_memory_used_leaves_out_the_drivers_reserve_as_nvidia_smi_does():
    """Recorded on the same H200 later (``*_nvml_memory_v1_v2.json``): the first form of
    nvmlDeviceGetMemoryInfo counts the driver's 615 MiB reserve as used, the second keeps
    it apart, as nvidia-smi's memory.used (0 MiB idle) does. The exporter asks for the
    second where the binding has it, and falls back to the first."""
    from jobs_exporter.nvml_replay import ReplayNvml

    rec = json.loads((NVML / f"{PREFIX}nvml_memory_v1_v2.json").read_text())
    assert rec["v1"]["used"] == rec["v2"]["used"] + rec["v2"]["reserved"]
    idle = json.loads((NVML / f"{PREFIX}nvml_replay_idle.json").read_text())["devices"][0]
    for v1_used, v2_used in ((rec["v1"]["used"], rec["v2"]["used"]),
                             (rec["with_4GiB"]["v1_used"], rec["with_4GiB"]["v2_used"])):
        device = {**idle, "memory_used_bytes": v1_used,
                  "memory_reserved_bytes": rec["v2"]["reserved"]}
        nvml = gpu_nvidia.Nvml(ReplayNvml([device]))
        assert nvml.start()
        assert nvml.read(0).memory_used_bytes == v2_used
        old_binding = ReplayNvml([device])
        old_binding.nvmlMemory_v2 = None  # a binding without the second form
        nvml = gpu_nvidia.Nvml(old_binding)
        assert nvml.start()
        assert nvml.read(0).memory_used_bytes == v1_used
    assert rec["v2"]["used"] == 0 and rec["v2"]["reserved"] == 644939776
    # 4 GiB allocated by one process: the second form counts what it holds (plus the
    # context's own), not the reserve beside it.
    procs = dict(rec["with_4GiB"]["procs"])
    assert abs(rec["with_4GiB"]["v2_used"] - sum(procs.values())) < 16 * MIB
