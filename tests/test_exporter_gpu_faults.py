"""GPU faults: XID events (NVML events in a background thread) and memory error counts.

fixtures/exporter/nvml/replay-xid.json replays a real kernel log's XIDs (48, a double-bit
ECC error, then 64, NVIDIA/gpu-operator#1146) on the H100 reading of replay.json, at the
seconds after boot the log shows; the ECC totals are the captures' (0 on every card).
"""

from __future__ import annotations

import gc
import json
import time

import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from jobs_exporter import gpu_amd, gpu_faults, gpu_nvidia
from jobs_exporter.gpu_inventory import Gpus
from jobs_exporter.nvml_replay import ReplayNvml
from jobs_exporter.registry import JobsCollector
from tests.helpers.exporter_scrape import FIXTURES, make_settings, samples, value
from tests.helpers.fake_amdsmi import FakeAmdSmi, replay_devices
from tests.helpers.fake_nvml import FakeNvml
from tests.helpers.wait import wait_for
from tests.test_exporter_gpu_amd import alloc_dir

NVML = FIXTURES / "nvml"
V1_LOCAL = FIXTURES / "v1-local"  # job 2 of the local stack


def xid_devices() -> list[dict]:
    return json.loads((NVML / "replay-xid.json").read_text())["devices"]


def test_the_replay_holds_the_kernel_logs_xids():
    (card,) = xid_devices()
    assert [(e["xid"], e["after_seconds"]) for e in card["xid_events"]] == [
        (48, 219.470994), (64, 219.47105)]


def test_xids_are_counted_by_card_and_code_once_their_time_has_come():
    clock = [0.0]
    replay = FakeNvml(xid_devices(), clock=lambda: clock[0])
    replay.sleep = lambda s: time.sleep(min(s, 0.01))
    nvml = gpu_nvidia.Nvml(replay)
    assert nvml.start() and nvml.xid_thread is not None
    device = nvml.devices[0]
    time.sleep(0.1)
    assert nvml.xid_errors(device) == {}  # 219 s after the driver loaded: not yet
    clock[0] = 220.0
    wait_for(lambda: nvml.xid_errors(device) == {48: 1, 64: 1}, 5, "both Xids counted",
             every=0.02)


def test_a_job_holding_the_card_sees_a_new_xid_at_0_then_its_count(tmp_path):
    """increase() over a series born at 1 is 0: the first scrape after a new code shows 0."""
    clock = [0.0]
    replay = FakeNvml(xid_devices(), clock=lambda: clock[0])
    replay.sleep = lambda s: time.sleep(min(s, 0.01))
    settings = make_settings(V1_LOCAL, gpus="auto", scontrol="",
                             gpu_alloc_dir=alloc_dir(tmp_path, j2="0"))
    registry = CollectorRegistry()
    registry.register(JobsCollector(settings, nvml=replay, user_name=lambda uid: "alice"))
    before = generate_latest(registry).decode()
    assert not [k for k in samples(before) if k[0] == "jobs_gpu_xid_errors_total"]
    clock[0] = 230.0
    # the first exposition that has the codes (the thread counts them meanwhile, one after
    # the other: wait for both) shows each at 0

    seen: list[str] = []

    def with_xids() -> str | None:
        seen.append(generate_latest(registry).decode())
        return seen[-1] if 'xid="48"' in seen[-1] and 'xid="64"' in seen[-1] else None

    wait_for(with_xids, 5, "an exposition with both Xid counters", every=0.02)
    for code in ("48", "64"):  # each code's first exposition shows it at 0
        born = next(t for t in seen if f'xid="{code}"' in t)
        assert value(born, "jobs_gpu_xid_errors_total", jobid="2", gpu="0", xid=code) == 0.0
    second = generate_latest(registry).decode()
    assert value(second, "jobs_gpu_xid_errors_total", jobid="2", gpu="0", xid="48") == 1.0
    assert value(second, "jobs_gpu_xid_errors_total", jobid="2", gpu="0", xid="64") == 1.0
    assert value(second, "jobs_gpu_ecc_errors_total", jobid="2", gpu="0",
                 type="corrected") == 0.0


def test_a_mig_devices_xids_are_its_gpu_instances_and_the_whole_cards():
    counts = gpu_faults.XidCounts()
    counts.add("0000:00:09.0", None, 79)
    counts.add("0000:00:09.0", 9, 13)
    counts.add("0000:00:09.0", 2, 31)
    counts.add("0000:00:0a.0", None, 48)
    assert counts.of("0000:00:09.0", 9) == {79: 1, 13: 1}
    assert counts.of("0000:00:09.0") == {79: 1, 13: 1, 31: 1}


def test_counts_are_bounded(monkeypatch):
    monkeypatch.setattr(gpu_faults, "MAX_KEYS", 2)
    counts = gpu_faults.XidCounts()
    for code in (1, 2, 3, 3):
        counts.add("0000:00:09.0", None, code)
    counts.add("0000:00:09.0", None, 1)
    assert counts.of("0000:00:09.0") == {1: 2, 2: 1} and counts.dropped == 2


def test_the_thread_ends_with_its_reader():
    replay = FakeNvml(xid_devices())
    replay.sleep = lambda s: time.sleep(min(s, 0.01))
    nvml = gpu_nvidia.Nvml(replay)
    assert nvml.start()
    thread = nvml.xid_thread
    del nvml
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_a_board_without_ecc_has_no_memory_error_series(tmp_path):
    t4 = {k: v for k, v in FakeNvml().devices[1].items() if k != "ecc_volatile"}
    nvml = gpu_nvidia.Nvml(FakeNvml([t4]))
    gpus = Gpus([nvml], "file")
    assert gpus.start()
    assert gpus.memory_errors(0) == (None, None)


def test_amd_memory_errors_are_the_cards_ras_counts():
    """The binding's shape; the counts are those amd-smi showed for one MI300X's UMC
    block in ROCm/device-metrics-exporter#368 (2 correctable)."""
    devices = replay_devices("stack-replay-mi300x.json")
    assert all("total_ecc_count" not in d for d in devices)  # no capture holds them
    amd = gpu_amd.AmdSmi(FakeAmdSmi(devices))
    gpus = Gpus([amd], "file")
    assert gpus.start() and gpus.memory_errors(0) == (None, None)
    counted = [{**devices[0], "total_ecc_count": {"correctable_count": 2,
                                                  "uncorrectable_count": 0,
                                                  "deferred_count": 0}}, devices[1]]
    gpus = Gpus([gpu_amd.AmdSmi(FakeAmdSmi(counted))], "file")
    assert gpus.start() and gpus.memory_errors(0) == (2, 0) and gpus.xid_errors(0) == {}


# ---------------------------------------------------------------- the real binding


EXPORTER_CALLS = (
    "nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2",
    "nvmlEventSetFree", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes", "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet",
    "c_nvmlGpmMetricsGet_t", "nvmlEventTypeXidCriticalError", "NVML_ERROR_TIMEOUT",
    "NVML_VOLATILE_ECC", "NVML_MEMORY_ERROR_TYPE_CORRECTED",
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_DEVICE_MIG_ENABLE",
    "NVML_GPM_METRIC_GRAPHICS_UTIL", "NVML_GPM_METRICS_GET_VERSION",
)


@pytest.mark.parametrize("name", EXPORTER_CALLS)
def test_the_replay_and_nvidia_ml_py_have_the_same_names(name):
    assert hasattr(pynvml, name) and hasattr(ReplayNvml, name)
    if name.isupper() or name.startswith("nvmlEventType"):
        assert getattr(pynvml, name) == getattr(ReplayNvml, name)


def test_nvidia_ml_pys_timeout_is_told_by_its_value():
    exc = pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
    assert isinstance(exc, pynvml.NVMLError) and exc.value == gpu_faults.NVML_ERROR_TIMEOUT
    query = pynvml.c_nvmlGpmMetricsGet_t()  # the fields jobs_exporter/gpu_mig.py sets
    query.version, query.numMetrics = pynvml.NVML_GPM_METRICS_GET_VERSION, 1
    query.metrics[0].metricId = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL
    assert query.metrics[0].metricId == 1 and hasattr(query.metrics[0], "nvmlReturn")
